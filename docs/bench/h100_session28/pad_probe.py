"""Session 28: does padding a few-row call with zero rows make the GPU's matmuls cheaper?

cuBLASLt on the H100 took more for 2-5 rows than for 6-8 (docs/benchmarks.md, eleventh pass:
the 8B's projections summed, 12.0-13.4 ms a step against 10.2-11.7). A decode step of 2-5 rows
and a one-row verify forward of 5 tokens run at those widths.

1. Every layer's MLP called once on the same input of N token rows (N = 1..16), evaluated
   together: as it is and compiled, alternated; ms per pass (median).
2. Whole forwards of the model at 512 keys, one row of w tokens (w = 1..8) and B rows of one
   token (B = 1..8): unpadded against padded (each N padded to the cheapest M >= N of step 1's
   compiled times, where 3% cheaper), alternated; ms (median) and logits against unpadded.
Usage: python pad_probe.py MODEL OUT.json"""

import json
import os
import statistics
import sys
import time

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache

import engine  # noqa: F401
from engine import compiled_mlp
from engine.models import load_model

ROUNDS, REPS, CONTEXT = (int(os.environ.get(k, d)) for k, d in (("ROUNDS", 4), ("REPS", 6), ("CONTEXT", 512)))
MAX_N = 16


def timed(fn, reps):
    out = []
    for _ in range(reps):
        mx.synchronize()
        start = time.perf_counter()
        mx.eval(fn())
        out.append(1e3 * (time.perf_counter() - start))
    return out


def main(name: str, path: str) -> None:
    loaded = load_model(name)
    model = loaded.model
    if not any(compiled_mlp.is_compiled(m) for _, m in model.named_modules()):
        compiled_mlp.compile_mlps(model, force=True)
    dim = model.layers[0].mlp.parameters()  # noqa: F841
    hidden = model.args.hidden_size
    mlps = [layer.mlp for layer in model.layers]
    dtype = model.layers[0].mlp.parameters()
    leaves = [v for _, v in __import__("mlx.utils").utils.tree_flatten(dtype)]
    dt = leaves[0].dtype if leaves[0].dtype != mx.uint32 else mx.bfloat16
    result = {"model": name, "mlp_ms": {}, "forward_ms": {}, "pad_to": {}, "logits": {}}
    xs = {n: (0.02 * mx.random.normal((1, n, hidden))).astype(dt) for n in range(1, MAX_N + 1)}
    mx.eval(list(xs.values()))
    times = {(way, n): [] for way in ("as_is", "compiled") for n in xs}
    for r in range(ROUNDS):
        for n, x in xs.items():
            for way in ("as_is", "compiled"):
                compiled_mlp.set_compiled(way == "compiled")
                t = timed(lambda: [m(x) for m in mlps], REPS + (1 if r == 0 else 0))
                times[(way, n)] += t[1:] if r == 0 else t
        print("mlp round", r, {n: round(statistics.median(times[("compiled", n)]), 3) for n in xs}, flush=True)
    compiled_mlp.set_compiled(True)
    med = {k: statistics.median(v) for k, v in times.items()}
    for (way, n), v in med.items():
        result["mlp_ms"].setdefault(way, {})[n] = round(v, 3)
    pad_to = {}
    for n in xs:
        best = min(range(n, MAX_N + 1), key=lambda m: med[("compiled", m)])
        if med[("compiled", best)] < 0.97 * med[("compiled", n)]:
            pad_to[n] = best
    result["pad_to"] = pad_to
    print("pad_to", pad_to, flush=True)

    shapes = [(1, w) for w in range(1, 9)] + [(b, 1) for b in range(2, 9)]
    caches = {}
    for b in sorted({s[0] for s in shapes}):
        cache = make_prompt_cache(model)
        mx.eval(model(mx.random.randint(0, 1000, (b, CONTEXT)), cache=cache))
        caches[b] = cache
    toks = {s: mx.random.randint(0, 1000, s) for s in shapes}
    ft = {(way, s): [] for way in ("plain", "padded") for s in shapes}
    for r in range(ROUNDS):
        for s in shapes:
            cache = caches[s[0]]
            ref = None
            for way in ("plain", "padded"):
                compiled_mlp.set_row_padding(model, pad_to if way == "padded" else {})
                for i in range(REPS + (1 if r == 0 else 0)):
                    mx.synchronize()
                    start = time.perf_counter()
                    logits = model(toks[s], cache=cache)
                    mx.eval(logits)
                    ms = 1e3 * (time.perf_counter() - start)
                    for c in cache:
                        c.trim(s[1])
                    if r == 0 and i == 0:
                        if way == "plain":
                            ref = logits.astype(mx.float32)
                        else:
                            d = mx.abs(logits.astype(mx.float32) - ref).max().item()
                            same = mx.array_equal(logits.argmax(-1), ref.argmax(-1)).item()
                            result["logits"][str(s)] = {"max_abs": d, "argmax_same": same}
                        continue
                    ft[(way, s)].append(ms)
        print("fwd round", r, {str(s): (round(statistics.median(ft[("plain", s)]), 2), round(statistics.median(ft[("padded", s)]), 2)) for s in shapes}, flush=True)
    compiled_mlp.set_row_padding(model, {})
    for (way, s), v in ft.items():
        result["forward_ms"].setdefault(way, {})[str(s)] = round(statistics.median(v), 3)
    print(json.dumps(result), flush=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
