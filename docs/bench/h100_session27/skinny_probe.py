"""Session 27, first call: can the skinny-matmul kernel's host cost be taken away by
`mx.compile`, and what is a 5-token forward of the random 8B then worth against a 1-token one?

1. Host cost of building one product (no eval), 5 x 4096 @ (28672 x 4096).T: MLX's matmul, the
   kernel called directly, the kernel inside a compiled function.
2. One row's forward over 5 tokens at 512 keys (mlx-lm KVCache, trimmed back after each), five
   ways alternated: MLX; the kernel for every linear and fused product; the same compiled per
   call; each layer's MLP compiled (MLX matmuls); each layer's MLP compiled with the kernel.
   And the 1-token forward with MLX. Per way: build ms (until the model returns) and whole ms.
   Logits of each way against MLX's (max abs difference, greedy tokens equal).
Usage: python skinny_probe.py OUT.json"""

import json
import os
import statistics
import sys
import time
import traceback

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache

import engine  # noqa: F401
from engine.kernels import skinny_matmul_cuda as smc
from engine.models import load_model
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from skinny_ways import WAYS, Switch, _compiled_kernel

ROUNDS, FORWARDS, CONTEXT = (int(os.environ.get(k, d)) for k, d in (("ROUNDS", 5), ("FORWARDS", 10), ("CONTEXT", 512)))


def build_us(fn, n=200) -> float:
    mx.synchronize()
    start = time.perf_counter()
    outs = [fn() for _ in range(n)]
    spent = time.perf_counter() - start
    mx.eval(outs)
    return 1e6 * spent / n


def main(out: str) -> None:
    result = {"host_us": {}, "forward": {}, "errors": {}}
    x = mx.random.normal((5, 4096)).astype(mx.bfloat16)
    w = mx.random.normal((28672, 4096)).astype(mx.bfloat16)
    mx.eval(x, w)
    mx.eval(smc.skinny_matmul(x, w), _compiled_kernel(x, w), x @ w.T)
    for name, fn in (
        ("mlx", lambda: x @ w.T),
        ("kernel_direct", lambda: smc.skinny_matmul(x, w)),
        ("kernel_compiled", lambda: _compiled_kernel(x, w)),
        ("mlx_again", lambda: x @ w.T),
    ):
        result["host_us"][name] = [round(build_us(fn), 2) for _ in range(3)]
    print("host", result["host_us"], flush=True)
    diff = mx.abs(smc.skinny_matmul(x, w).astype(mx.float32) - (x @ w.T).astype(mx.float32))
    result["kernel_vs_mlx_max_abs"] = diff.max().item()

    loaded = load_model(os.environ.get("MODEL", "random:8b"))
    model = loaded.model
    switch = Switch(model)
    use = switch.use
    use("mlx")
    cache = make_prompt_cache(model)
    prompt = mx.random.randint(0, 1000, (1, CONTEXT))
    mx.eval(model(prompt, cache=cache))
    ways = [*WAYS, "mlx_1"]
    toks = {n: mx.random.randint(0, 1000, (1, 1 if n == "mlx_1" else 5)) for n in ways}
    reference = None
    times = {w: {"build": [], "whole": []} for w in ways}
    for r in range(ROUNDS):
        for way in ways:
            try:
                use("mlx" if way == "mlx_1" else way)
                t = toks["mlx" if way != "mlx_1" else way]
                for i in range(FORWARDS + (1 if r == 0 else 0)):
                    mx.synchronize()
                    start = time.perf_counter()
                    logits = model(t, cache=cache)
                    built = time.perf_counter()
                    mx.eval(logits)
                    done = time.perf_counter()
                    for c in cache:
                        c.trim(t.shape[1])
                    if r == 0 and i == 0:
                        if way == "mlx":
                            reference = logits.astype(mx.float32)
                        elif way != "mlx_1":
                            d = mx.abs(logits.astype(mx.float32) - reference)
                            same = mx.array_equal(logits.argmax(-1), reference.argmax(-1)).item()
                            result["errors"][way] = {"max_abs": d.max().item(), "argmax_same": same}
                        continue  # the first forward of a way compiles
                    times[way]["build"].append(1e3 * (built - start))
                    times[way]["whole"].append(1e3 * (done - start))
            except Exception:
                result["errors"][way] = traceback.format_exc()[-800:]
                print(way, result["errors"][way], flush=True)
        print("round", r, {w: round(statistics.median(v["whole"]), 2) for w, v in times.items() if v["whole"]}, flush=True)
    for way, v in times.items():
        if v["whole"]:
            result["forward"][way] = {
                "build_ms": round(statistics.median(v["build"]), 3),
                "whole_ms": round(statistics.median(v["whole"]), 3),
                "whole_min_ms": round(min(v["whole"]), 3),
            }
    use("mlx")
    print(json.dumps(result, indent=1), flush=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
