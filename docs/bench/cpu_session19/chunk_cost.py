"""Session 19: the bare mlx-lm default model (fp32, OpenBLAS) prefilling 2,048 tokens in chunks of
512, 64 and 16, twice each: total seconds and each quarter of the prompt. Where a prompt token
costs what it does on the 2-core CPU. Run: PYTHONPATH=. python THIS."""

import time, engine
import mlx.core as mx
from mlx_lm import load
from mlx_lm.models.cache import make_prompt_cache
import engine.default_model as dm
path = dm.ensure_default_model()
model, tok = load(str(path))
ids = mx.array([[(i * 7919) % 40000 + 100 for i in range(2048)]])

def run(chunk):
    cache = make_prompt_cache(model)
    times = []
    for s in range(0, 2048, chunk):
        t = time.perf_counter()
        out = model(ids[:, s:s+chunk], cache=cache)
        mx.eval(out, [c.state for c in cache])
        times.append(time.perf_counter() - t)
    return times

for chunk in (512, 64, 16, 512, 64, 16):
    t = run(chunk)
    q = len(t)//4
    print(chunk, "total %.2f s" % sum(t), "quarters", [round(sum(t[i*q:(i+1)*q]), 2) for i in range(4)], flush=True)
