"""python -m engine.bench.prompt_cache_publish: what publishing a finished reply to the prompt
cache costs the MLX thread, against a decode step, as the scheduler does it: a batch of two rows
holding `--tokens` positions; row 0 finishes (extract, publish, remove) while row 1 keeps
decoding, with the cache's tick between steps. Then, after a restart, restoring that reply from
disk: a blocking lookup (what an idle engine does), and a lookup in the background while the
other row decodes (the reader thread reads and checksums the file; the MLX thread converts it a
layer at a time). Reports milliseconds and shares of a decode step."""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time

import mlx.core as mx
from mlx_lm.models.cache import BatchKVCache, make_prompt_cache

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine.bench.cli_args import positive_int
from engine.cache import LOADING, CacheNamespace, PromptCache
from engine.models import load_model

DEFAULT_TOKENS = 4000
DEFAULT_REPEATS = 5
DEFAULT_STEPS_AFTER = 12
PREFILL_CHUNK = 512


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m engine.bench.prompt_cache_publish", description=__doc__
    )
    p.add_argument("--model", default=None, help="model folder, HF repo id, random:1b|8b|tiny|host")
    p.add_argument(
        "--tokens", type=positive_int, default=DEFAULT_TOKENS, help="the reply's history"
    )
    p.add_argument("--repeats", type=positive_int, default=DEFAULT_REPEATS)
    p.add_argument(
        "--steps-after",
        type=positive_int,
        default=DEFAULT_STEPS_AFTER,
        help="decode steps after each publish (their median is the step the costs are shares of)",
    )
    p.add_argument("--ram-only", action="store_true", help="no disk tier")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    model = load_model(args.model).model
    rng = random.Random(0)
    tokens = [rng.randrange(100, 49000) for _ in range(args.tokens)]
    row = make_prompt_cache(model)
    for i in range(0, len(tokens), PREFILL_CHUNK):
        model(mx.array(tokens[i : i + PREFILL_CHUNK])[None], cache=row)
        mx.eval([c.state for c in row])
    folder = None if args.ram_only else tempfile.mkdtemp(prefix="bench-pc-")
    cache = PromptCache(disk_dir=folder)
    ns = CacheNamespace("bench", "bench")

    def step(batch: list, inputs: mx.array) -> tuple[mx.array, float]:
        start = time.perf_counter()
        y = mx.argmax(model(inputs[:, None], cache=batch)[:, -1, :], axis=-1)
        mx.eval(y)
        return y, time.perf_counter() - start

    publish, before, after, ticks, tick_sums = [], [], [], [], []
    for rep in range(args.repeats):
        batch = [BatchKVCache.merge([c, c]) for c in row]
        inputs = mx.array([tokens[-1]] * 2)
        for _ in range(3):
            inputs, t = step(batch, inputs)
            before.append(t)
        start = time.perf_counter()
        target = [layer.extract(0) for layer in batch]
        held = target[0].offset
        history = tokens + [1000 * rep + i for i in range(held - len(tokens))]
        cache.publish(ns, history, target)
        publish.append(time.perf_counter() - start)
        for layer in batch:
            layer.filter([1])
        inputs = inputs[1:]
        these = []
        for _ in range(args.steps_after):
            inputs, t = step(batch, inputs)
            after.append(t)
            start = time.perf_counter()
            cache.tick(idle=False)
            these.append(time.perf_counter() - start)
        ticks += these
        tick_sums.append(sum(these))
        cache.flush()
    cache.close()
    restore = (
        restore_times(folder, ns, history + [7], lambda: step(batch, inputs)) if folder else {}
    )

    step_ms = statistics.median(after) * 1e3

    def line(name: str, seconds: float) -> str:
        return f"{name:<34} {seconds * 1e3:9.1f} ms  {seconds * 1e3 / step_ms:6.2f} steps"

    print(f"model {args.model or 'default'}, history {args.tokens} tokens, {args.repeats} repeats")
    print(line("decode step, 2 rows (median)", statistics.median(before)))
    print(line("decode step, 1 row (median)", statistics.median(after)))
    print(line("publish call (median)", statistics.median(publish)))
    print(line("publish call (max)", max(publish)))
    print(line("tick (max)", max(ticks)))
    print(line("ticks of one publish (median sum)", statistics.median(tick_sums)))
    for name, seconds in restore.items():
        print(line(name, seconds))


def restore_times(folder: str, ns: CacheNamespace, request: list[int], step) -> dict[str, float]:
    """Restore `request`'s entry after a restart: blocking, then in the background."""
    cache = PromptCache(disk_dir=folder)
    start = time.perf_counter()
    assert cache.lookup(ns, request) is not None
    blocking = time.perf_counter() - start
    cache.close()
    cache = PromptCache(disk_dir=folder)
    calls, steps = [], 0
    while True:
        start = time.perf_counter()
        match = cache.lookup(ns, request, wait=False)
        calls.append(time.perf_counter() - start)
        if match is not LOADING:
            break
        step()
        steps += 1
        start = time.perf_counter()
        cache.tick(idle=False)
        calls.append(time.perf_counter() - start)
    cache.close()
    assert match is not None
    return {
        "restore from disk, blocking": blocking,
        f"background: longest call ({steps} steps)": max(calls),
        "background: all calls": sum(calls),
    }


if __name__ == "__main__":
    from engine.bench.process_exit import run_and_exit

    run_and_exit(main)
