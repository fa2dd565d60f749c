"""What a forward over a new number of tokens costs the first time, against the same again.

    python -m engine.bench.shape_cost --model random:1b --json PATH

One row's cache holds `--context` positions; each chunk length is run over it three times (the
cache trimmed back after each), then the context moves on by a few positions so the next length
meets a new key length too. On MLX's CUDA backend the first forward of a length builds its
attention graph (cuDNN), 25-30 ms for a 1B model on the H200 where the same forward again takes
5-7 ms; this is why the prefill pacer takes powers of two there (engine/core/prefill_pacer.py).
On Metal and the CPU the first and later runs cost about the same.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from engine.bench.cli_args import positive_int
from engine.bench.device_rows import write_device_rows

DEFAULT_CONTEXT = 1000
DEFAULT_CHUNKS = (100, 130, 170, 220, 300, 64, 64)
DEFAULT_MOVE = 7  # positions the context moves on between lengths


def _forward_ms(model: Any, cache: list[Any], tokens: int) -> float:
    import mlx.core as mx

    x = mx.full((1, tokens), 5, dtype=mx.uint32)
    start = time.perf_counter()
    mx.eval(model(x, cache=cache))
    return 1e3 * (time.perf_counter() - start)


def measure(model: Any, *, context: int, chunks: tuple[int, ...]) -> list[dict[str, Any]]:
    """Per chunk length: ms of its first forward and of two more over the same positions."""
    from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

    cache = make_prompt_cache(model)
    _forward_ms(model, cache, context)
    rows = []
    for n in chunks:
        runs = []
        for _ in range(3):
            runs.append(round(_forward_ms(model, cache, n), 2))
            trim_prompt_cache(cache, n)
        rows.append({"tokens": n, "first_ms": runs[0], "again_ms": runs[1:]})
        _forward_ms(model, cache, DEFAULT_MOVE)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", default="random:1b", help="model folder or random:1b|8b|tiny|host"
    )
    # the cache is filled by one forward over --context tokens: an empty one has no forward
    parser.add_argument("--context", type=positive_int, default=DEFAULT_CONTEXT)
    parser.add_argument("--chunks", type=positive_int, nargs="+", default=list(DEFAULT_CHUNKS))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    import mlx.core as mx

    from engine.models import load_model

    model = load_model(args.model).model
    rows = measure(model, context=args.context, chunks=tuple(args.chunks))
    print(f"{args.model} on {mx.default_device()}, context {args.context}")
    print("| tokens | first (ms) | again (ms) |\n|---:|---:|---|")
    for row in rows:
        again = ", ".join(f"{v:.2f}" for v in row["again_ms"])
        print(f"| {row['tokens']} | {row['first_ms']:.2f} | {again} |")
    write_device_rows(args.json, args.model, rows)
    return 0


if __name__ == "__main__":
    from engine.bench.process_exit import run_and_exit

    run_and_exit(main)
