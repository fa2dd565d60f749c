"""Per-row moves of cache positions on this CPU: MLX's element-wise take_along_axis (as the
engine did before session 33, and mlx-lm's dynamic_roll) against engine/cache/position_moves.py,
alternated, medians. Compaction of every layer of the default model's cache after eight width-5
rounds whose rows kept 1-5 positions at random; rolls of one [B, H, 512, D] bfloat16 buffer.

    PYTHONPATH=.:docs/bench/gpu_session33:docs/bench/gpu_session32 \\
        python docs/bench/cpu_session33/moves_ab.py --json out.json
"""

from __future__ import annotations

# isort: off
import engine  # noqa: F401  (OpenBLAS before the first import of MLX)

# isort: on
import argparse
import json
import statistics
import time

import mlx.core as mx
from host_arrays import _holey
from mlx_lm.models.cache import dynamic_roll

from engine.cache import ragged
from engine.cache.position_moves import roll_positions, take_positions
from engine.models import load_model

REPEATS = 5


def elementwise_take(x: mx.array, order: mx.array) -> mx.array:
    return mx.take_along_axis(x, order[:, None, :, None], axis=2)


def compaction_ms(model, batch: int, take) -> tuple[float, mx.array]:
    cache = _holey(model, batch)
    ragged.take_positions = take
    try:
        start = time.perf_counter()
        for c in cache:
            c.compact()
        mx.eval([(c.keys, c.values, c.left_padding) for c in cache])
        return 1e3 * (time.perf_counter() - start), cache[0].keys
    finally:
        ragged.take_positions = take_positions


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--json", default=None)
    args = p.parse_args()
    model = load_model(None).model
    rows = []
    for batch in (4, 16):
        ms: dict[str, list[float]] = {"take_along_axis": [], "take_positions": []}
        for _ in range(REPEATS):
            old, old_keys = compaction_ms(model, batch, elementwise_take)
            new, new_keys = compaction_ms(model, batch, take_positions)
            assert mx.array_equal(old_keys, new_keys).item()
            ms["take_along_axis"].append(old)
            ms["take_positions"].append(new)
        rows.append(dict(what="compaction, every layer", batch=batch, **_medians(ms)))
        print(json.dumps(rows[-1]), flush=True)
    for shape in ((4, 1, 512, 256), (4, 4, 512, 128), (16, 8, 512, 128)):
        x = mx.random.normal(shape).astype(mx.bfloat16)
        shifts = mx.array([b % 5 for b in range(shape[0])])[:, None]
        mx.eval(x, shifts)
        ms = {"dynamic_roll": [], "roll_positions": []}
        for _ in range(REPEATS):
            for name, roll in (
                ("dynamic_roll", lambda x=x, s=shifts: dynamic_roll(x, s, axis=2)),
                ("roll_positions", lambda x=x, s=shifts: roll_positions(x, s)),
            ):
                start = time.perf_counter()
                mx.eval([roll() for _ in range(10)])
                ms[name].append(1e3 * (time.perf_counter() - start) / 10)
        rows.append(dict(what="one roll", shape=list(shape), **_medians(ms)))
        print(json.dumps(rows[-1]), flush=True)
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)


def _medians(ms: dict[str, list[float]]) -> dict:
    return {k: round(statistics.median(v), 2) for k, v in ms.items()} | {
        "runs_ms": {k: [round(x, 1) for x in v] for k, v in ms.items()}
    }


if __name__ == "__main__":
    main()
