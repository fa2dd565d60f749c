"""Session 28: a forward with its decoder layers launched early (engine/core/early_launch.py)
against one evaluated only at its end, the random 8B at 512 keys (mlx-lm KVCache, trimmed back
after each): one row of 5 tokens (a verify forward) and of 1 token, and 4 rows of 1 token; a
launch every 4, 8 or 16 layers, or none; alternated; build and whole ms (median).
Usage: python early_probe.py MODEL OUT.json"""

import json
import os
import statistics
import sys
import time

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache

import engine  # noqa: F401
from engine.core import early_launch as el
from engine.models import load_model

ROUNDS, REPS, CONTEXT = (int(os.environ.get(k, d)) for k, d in (("ROUNDS", 4), ("REPS", 8), ("CONTEXT", 512)))
EVERY = (0, 4, 8, 16)


def set_every(model, every: int) -> None:
    for layer in model.layers:
        if isinstance(layer, el.LaunchesEarly):
            layer.__class__ = type(layer).__bases__[1]
    model.__dict__.pop(el._MARK, None)
    if every:
        el.enable(model, every=every)


def main(name: str, out: str) -> None:
    model = load_model(name).model
    shapes = [(1, 5), (1, 1), (4, 1)]
    caches = {}
    for b in (1, 4):
        cache = make_prompt_cache(model)
        mx.eval(model(mx.random.randint(0, 1000, (b, CONTEXT)), cache=cache))
        caches[b] = cache
    toks = {s: mx.random.randint(0, 1000, s) for s in shapes}
    times = {(e, s): {"build": [], "whole": []} for e in EVERY for s in shapes}
    same = {}
    for r in range(ROUNDS):
        for e in EVERY:
            set_every(model, e)
            for s in shapes:
                cache = caches[s[0]]
                for i in range(REPS + (1 if r == 0 else 0)):
                    mx.synchronize()
                    start = time.perf_counter()
                    el._state["active"] = bool(e)
                    logits = model(toks[s], cache=cache)
                    el._state["active"] = False
                    built = time.perf_counter()
                    mx.eval(logits)
                    done = time.perf_counter()
                    for c in cache:
                        c.trim(s[1])
                    if r == 0 and i == 0:
                        key = str(s)
                        if e == 0:
                            same[key] = logits
                        else:
                            same[f"{key}_{e}"] = mx.array_equal(logits, same[key]).item()
                        continue
                    times[(e, s)]["build"].append(1e3 * (built - start))
                    times[(e, s)]["whole"].append(1e3 * (done - start))
        print("round", r, {f"{e}{s}": round(statistics.median(v["whole"]), 2) for (e, s), v in times.items()}, flush=True)
    result = {
        "model": name,
        "bit_equal": {k: v for k, v in same.items() if not isinstance(v, mx.array)},
        "ms": {
            f"every{e} {s}": {k: round(statistics.median(v), 3) for k, v in t.items()}
            for (e, s), t in times.items()
        },
    }
    print(json.dumps(result), flush=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
