"""Where a decode step's host time goes on CUDA, and whether it overlaps the device: Python's
graph building, MLX's encoding (`mx.async_eval`) and the wait for the step before, pipelined
and with the device idle before each step; then the same split inside the engine's plain steps
and its verify rounds queued ahead (synthetic drafter, k=4, p=0.9).

    python host_split.py --model random:8b --batch 4 16 --json out.json

If encoding a step takes much longer pipelined than with the device idle, `async_eval` waits
for the device; if it takes as long, the host's work itself is what a step costs past the
device's.
"""

from __future__ import annotations

# isort: off
import engine  # noqa: F401  (OpenBLAS before MLX, where it matters)

# isort: on
import argparse
import collections
import json
import os
import re
import statistics
import tempfile
import time
from collections import defaultdict

import mlx.core as mx

from engine.api import EngineConfig
from engine.bench import ladder_rungs as rungs
from engine.bench.profile_round import prefilled_batch
from engine.bench.synthetic import SyntheticDrafter
from engine.core import batch as batch_module
from engine.core import lookahead
from engine.core.engine_core import EngineCore
from engine.models import load_model

CONTEXT = 256


def med(xs: list[float]) -> float:
    return round(1e3 * statistics.median(xs), 3) if xs else 0.0


def op_counts(arr: mx.array) -> dict:
    """The primitives in the graph that computes `arr` (MLX's DOT export), by kind."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "graph.dot")
        mx.export_to_dot(path, arr)
        with open(path) as f:
            kinds = re.findall(r'label\s*=\s*"([^"]*)"', f.read())
    counts = collections.Counter(re.sub(r"\s.*", "", k) for k in kinds)
    return {"total": sum(counts.values()), **dict(counts.most_common(24))}


def bare(model, batch: int, width: int, steps: int = 24) -> dict:
    """Forwards of `width` tokens a row over our ragged cache: build, encode, wait (the step
    before), pipelined; then build, encode, run, each with the device idle before."""
    prompts = rungs.prompts_for(batch, CONTEXT)
    cache = prefilled_batch(model, [p[:-1] for p in prompts], ours=True)
    x = mx.array([[p[-1]] * width for p in prompts], dtype=mx.uint32)
    parts = defaultdict(list)
    ops = op_counts(mx.argmax(model(x, cache=cache)[:, -1], axis=-1))
    mx.eval(cache[0].keys)  # that forward's writes
    prev = None
    for i in range(steps + 3):
        t0 = time.perf_counter()
        y = mx.argmax(model(x, cache=cache)[:, -1], axis=-1)
        t1 = time.perf_counter()
        mx.async_eval(y)
        t2 = time.perf_counter()
        if prev is not None:
            prev.tolist()
        t3 = time.perf_counter()
        prev = y
        if i >= 3:
            parts["build"].append(t1 - t0)
            parts["encode"].append(t2 - t1)
            parts["wait"].append(t3 - t2)
            parts["step"].append(t3 - t0)
    prev.tolist()
    for _ in range(8):
        mx.synchronize()
        t0 = time.perf_counter()
        y = mx.argmax(model(x, cache=cache)[:, -1], axis=-1)
        t1 = time.perf_counter()
        mx.async_eval(y)
        t2 = time.perf_counter()
        y.tolist()
        t3 = time.perf_counter()
        parts["idle_build"].append(t1 - t0)
        parts["idle_encode"].append(t2 - t1)
        parts["idle_run"].append(t3 - t2)
    return {**{k: med(v) for k, v in parts.items()}, "ops": ops}


class TimedMx:
    """mlx.core with eval and async_eval timed (installed into one engine module)."""

    def __init__(self, real, parts: dict, prefix: str) -> None:
        self._real, self._parts, self._prefix = real, parts, prefix

    def __getattr__(self, name):
        return getattr(self._real, name)

    def async_eval(self, *arrays):
        start = time.perf_counter()
        self._real.async_eval(*arrays)
        self._parts[self._prefix + "encode"].append(time.perf_counter() - start)

    def eval(self, *arrays):
        start = time.perf_counter()
        self._real.eval(*arrays)
        self._parts[self._prefix + "eval"].append(time.perf_counter() - start)


def timed(parts: dict, name: str, fn):
    def wrapper(*a, **kw):
        start = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            parts[name].append(time.perf_counter() - start)

    return wrapper


def engine_split(loaded, batch: int, synth: SyntheticDrafter, core: EngineCore) -> dict:
    prompts = rungs.prompts_for(batch, CONTEXT)
    replies = rungs.engine_replies(core, prompts, rungs.reply_tokens(40, verify=True) + 2)
    for prompt, reply in zip(prompts, replies):
        synth.expect(prompt, reply, rungs.DEFAULT_ACCEPTANCE)
    out = {}
    for name, verify, ahead in (("plain", False, False), ("ahead", True, True)):
        parts: dict = defaultdict(list)
        saved = (lookahead.mx, batch_module.mx, lookahead.launch, lookahead.read_back)
        saved_forward, saved_step = batch_module.DecodeBatch._forward, core.step
        lookahead.mx = TimedMx(mx, parts, "round_")
        batch_module.mx = TimedMx(mx, parts, "plain_")
        lookahead.launch = timed(parts, "launch", saved[2])
        lookahead.read_back = timed(parts, "read_back", saved[3])
        batch_module.DecodeBatch._forward = timed(parts, "model_build", saved_forward)
        core.step = timed(parts, "core_step", saved_step)
        try:
            result = rungs.engine_core(core, prompts, 40, verify=verify, ahead=ahead)
        finally:
            lookahead.mx, batch_module.mx, lookahead.launch, lookahead.read_back = saved
            batch_module.DecodeBatch._forward = saved_forward
            core.step = saved_step
        tail = {k: v[len(v) // 3 :] for k, v in parts.items()}  # past the prefill and warm-up
        out[name] = {"ms": round(result["ms"], 3), **{k: med(v) for k, v in tail.items()}}
        out[name]["timing"] = result["step_timing_ms"]
        print(f"engine {name} B={batch}: {out[name]}", flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="random:8b")
    p.add_argument("--batch", type=int, nargs="+", default=[4, 16])
    p.add_argument("--json", default=None)
    p.add_argument("--bare-only", action="store_true")
    args = p.parse_args()
    loaded = load_model(args.model)
    results: dict = {"device": str(mx.default_device()), "bare": {}, "engine": {}}
    for b in [1, *args.batch]:
        for w in (1, 5):
            r = bare(loaded.model, b, w)
            results["bare"][f"{b}x{w}"] = r
            print(f"bare B={b} W={w}: {r}", flush=True)
    synth = SyntheticDrafter(vocab_size=loaded.info.vocab_size)
    config = EngineConfig(
        model=args.model,
        prefill_chunk=max(args.batch) * CONTEXT,
        prefill_gap_factor=None,
        max_batch=max(args.batch),
        prompt_cache=False,
        log_blas=False,
        extra_drafters=synth.entry(),
    )
    core = EngineCore(loaded, config=config)
    for b in [] if args.bare_only else args.batch:
        results["engine"][str(b)] = engine_split(loaded, b, synth, core)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
