"""Does async_eval of a verify-width forward block on the GPU? build / async_eval / wait, per cache kind."""
import statistics, sys, time
import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache
from engine.models import load_model
from engine.bench.profile_round import prefilled_batch, ragged_prompts

spec = sys.argv[1]
model = load_model(spec).model
def run(label, cache, B, w, reps=15):
    x = mx.ones((B, w), dtype=mx.uint32) * 5
    rows = []
    for i in range(reps + 3):
        mx.synchronize()
        a = time.perf_counter(); out = model(x, cache=cache); b = time.perf_counter()
        mx.async_eval(out); c = time.perf_counter(); mx.eval(out); d = time.perf_counter()
        for l in cache: l.trim(w)
        if i >= 3: rows.append((b - a, c - b, d - c))
    med = [1e3 * statistics.median(r[j] for r in rows) for j in range(3)]
    print(f"{spec} {label:10s} B={B} w={w}: build {med[0]:.2f}  async_eval {med[1]:.2f}  wait {med[2]:.2f}  total {sum(med):.2f} ms", flush=True)
for B in (1, 4, 16):
    for w in (1, 5):
        ours = prefilled_batch(model, ragged_prompts(B, 256) if B > 1 else [[3] * 256])
        run("ragged", ours, B, w)
        if B == 1:
            plain = make_prompt_cache(model); model(mx.ones((1, 256), dtype=mx.uint32), cache=plain); mx.eval([c.state for c in plain])
            run("kvcache", plain, B, w)
