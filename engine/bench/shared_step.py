"""What one step costs when a prompt's chunk rides on the decode step, against two forwards.

    python -m engine.bench.shared_step [--model random:1b] [--rows 3] [--chunks 16 64] --json PATH

`--rows` rows decode over caches of about `--row-context` positions; a prompt's cache holds
`--context`. For each chunk length, medians of `--repeats` runs (every cache trimmed back after
each, so all runs see the same positions) of: the decode step alone, the chunk alone, both in
forwards of their own (the decode step queued first, as the engine does), and both in one
shared forward (engine/core/packed_forward.py).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.bench.cli_args import non_negative_int, positive_int
from engine.bench.device_rows import write_device_rows

DEFAULT_ROWS = 3
DEFAULT_ROW_CONTEXT = 300
DEFAULT_CONTEXT = 1000
DEFAULT_CHUNKS = (8, 16, 32, 64, 128)
DEFAULT_REPEATS = 5


def measure(
    model: Any, *, rows: int, row_context: int, context: int, chunks: tuple[int, ...], repeats: int
) -> list[dict[str, Any]]:
    """Per chunk length: milliseconds of each way to run the step."""
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    from engine.cache.batch_rows import merge_row_caches
    from engine.core.packed_forward import Part, enable, packed_forward

    problem = enable(model)
    if problem is not None:
        raise SystemExit(f"this model cannot share a forward: {problem}")
    rng = random.Random(0)

    def tokens(n: int) -> mx.array:
        return mx.array([[rng.randrange(100, 30000) for _ in range(n)]], dtype=mx.uint32)

    def filled(n: int) -> list[Any]:
        cache = make_prompt_cache(model)
        if n > 0:  # an empty prompt's cache is the fresh one
            model(tokens(n), cache=cache)
            mx.eval([c.state for c in cache])
        return cache

    batch = merge_row_caches([filled(row_context + 10 * i) for i in range(rows)])
    prompt = filled(context)
    pending = mx.array([[5 + i] for i in range(rows)], dtype=mx.uint32)
    caches = [c.state for c in batch + prompt]

    def decode_only(n: int) -> None:
        mx.eval(mx.argmax(model(pending, cache=batch)[:, -1], -1), caches)

    def chunk_only(n: int) -> None:
        model(tokens(n), cache=prompt)
        mx.eval([c.state for c in prompt])

    def separate(n: int) -> None:
        y = mx.argmax(model(pending, cache=batch)[:, -1], -1)
        mx.async_eval(y)
        model(tokens(n), cache=prompt)
        mx.eval(y, [c.state for c in batch + prompt])

    def shared(n: int) -> None:
        (_, logits), _ = packed_forward(model, [Part(pending, batch), Part(tokens(n), prompt)])
        mx.eval(mx.argmax(logits[:, -1], -1), [c.state for c in batch + prompt])

    def timed(run: Callable[[int], None], n: int, *, rows_fed: bool, chunk_fed: bool) -> float:
        spent = []
        for _ in range(repeats):
            start = time.perf_counter()
            run(n)
            spent.append(1e3 * (time.perf_counter() - start))
            for cache, fed in ((batch, rows_fed), (prompt, chunk_fed)):
                if fed:
                    for layer in cache:
                        layer.trim(1 if cache is batch else n)
        return round(statistics.median(spent), 2)

    out = []
    for n in chunks:
        out.append(
            {
                "chunk": n,
                "decode_ms": timed(decode_only, n, rows_fed=True, chunk_fed=False),
                "chunk_ms": timed(chunk_only, n, rows_fed=False, chunk_fed=True),
                "separate_ms": timed(separate, n, rows_fed=True, chunk_fed=True),
                "shared_ms": timed(shared, n, rows_fed=True, chunk_fed=True),
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", default=None, help="model folder or random:1b|8b (default: ours)"
    )
    parser.add_argument("--rows", type=positive_int, default=DEFAULT_ROWS)
    parser.add_argument("--row-context", type=positive_int, default=DEFAULT_ROW_CONTEXT)
    # 0: the prompt's chunk starts at its first position
    parser.add_argument("--context", type=non_negative_int, default=DEFAULT_CONTEXT)
    parser.add_argument("--chunks", type=positive_int, nargs="+", default=list(DEFAULT_CHUNKS))
    parser.add_argument("--repeats", type=positive_int, default=DEFAULT_REPEATS)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    import mlx.core as mx

    from engine.models import load_model

    model = load_model(args.model).model
    rows = measure(
        model,
        rows=args.rows,
        row_context=args.row_context,
        context=args.context,
        chunks=tuple(args.chunks),
        repeats=args.repeats,
    )
    print(f"{args.model or 'default model'} on {mx.default_device()}, {args.rows} rows")
    print("| chunk | decode | chunk alone | two forwards | shared | saved |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        saved = r["separate_ms"] - r["shared_ms"]
        print(
            f"| {r['chunk']} | {r['decode_ms']:.1f} | {r['chunk_ms']:.1f} | "
            f"{r['separate_ms']:.1f} | {r['shared_ms']:.1f} | {saved:.1f} |"
        )
    write_device_rows(args.json, args.model, rows)
    return 0


if __name__ == "__main__":
    from engine.bench.process_exit import run_and_exit

    run_and_exit(main)
