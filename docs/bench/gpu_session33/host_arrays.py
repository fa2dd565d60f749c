"""Whether arrays made from host data in the middle of a pipelined loop cost the GPU loop time:
the wide forward of session 32 (B rows x 5 tokens over our RaggedBatchKVCache, each row keeping
two) with host-made arrays added each round, against the same with device-made ones, and the
ragged give-back (rows keeping 1-5 at random) as the cache did it (an array of the rows' extra
positions made per layer), with one array shared by every layer, and with one shared array and
no holes in the mask (timing only: the rows attend over positions they gave back). Then the parts
of a compaction of every layer and per-row rolls, MLX's element-wise gathers against
engine/cache/position_moves.py.

    python host_arrays.py --model random:8b --json out.json

(with docs/bench/gpu_session32, for wide_probe.py, on PYTHONPATH; the device scripts copy both
into one folder)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import mlx.core as mx
from wide_probe import STEPS, WARM, _ours, compaction_ms

from engine.cache.ragged import RaggedBatchKVCache
from engine.models import load_model
from engine.speculative.rollback import rollback_rows

WIDTH = 5


def ragged_rollback(layers: list, surplus: list[int], *, shared: bool) -> None:
    """Our cache's per-row rollback in every layer: an array of the rows' extra positions made
    per layer (as before session 33), or one made once and shared (`extra_array`)."""
    smallest = min(surplus)
    extra = mx.array([s - smallest for s in surplus]) if shared else None
    for c in layers:
        c.rollback(surplus, extra_array=extra)


def run(model, batch: int, variant: str) -> dict:
    rng, cache, x = _ours(model, batch, WIDTH)
    kept_alive: list = []

    def give_back() -> None:
        nonlocal kept_alive
        if variant.startswith("ragged"):
            surplus = [WIDTH - rng.randint(1, WIDTH) for _ in range(batch)]
            ragged_rollback(cache, surplus, shared=variant != "ragged")
            if variant == "ragged-no-holes":  # timing only: the rows' offsets as ragged, no holes
                for c in cache:
                    c.hole_spans, c.holes = [], 0
            return
        rollback_rows(cache, [WIDTH - 2] * batch)
        if variant == "host-used-per-layer":
            for c in cache:
                c.offset = c.offset + mx.array([0] * batch)
        elif variant == "host-used-shared":
            zero = mx.array([0] * batch)
            for c in cache:
                c.offset = c.offset + zero
        elif variant == "host-unused-32":
            kept_alive = [mx.array([0] * batch) for _ in cache]
        elif variant == "device-used-per-layer":
            for c in cache:
                c.offset = c.offset + mx.zeros((batch,), mx.int32)

    out, start, host = None, 0.0, []
    for i in range(STEPS + WARM):
        if i == WARM:
            mx.eval(out)
            start = time.perf_counter()
        t0 = time.perf_counter()
        out = mx.argmax(model(x, cache=cache), axis=-1)
        mx.async_eval(out)
        give_back()
        if i >= WARM:
            host.append(time.perf_counter() - t0)
    mx.eval(out)
    ms = 1e3 * (time.perf_counter() - start) / STEPS
    return dict(ms=ms, host_ms=1e3 * statistics.median(host))


def _holey(model, batch: int) -> list:
    """Our cache after eight width-5 forwards, rows keeping 1-5 at random: holes in every row
    (as wide_probe.compaction_ms makes them)."""
    rng, cache, x = _ours(model, batch, WIDTH)
    for _ in range(8):
        mx.eval(model(x, cache=cache))
        for c in cache:
            c.__dict__["holes"] = 0  # no compaction while the holes are made
        ragged_rollback(cache, [WIDTH - rng.randint(1, WIDTH) for _ in range(batch)], shared=True)
    mx.eval([(c.keys, c.values, c.offset) for c in cache])
    return cache


def _order(c) -> mx.array:
    """compact()'s gather indices [B, 1, capacity, 1] for one layer."""
    valid = c.valid_map(c.written, settled_only=True)
    order = mx.argsort(valid.astype(mx.int32) * (c.written + 1) + mx.arange(c.written)[None])
    capacity = c.keys.shape[2]
    if capacity > c.written:
        tail = mx.arange(c.written, capacity)[None]
        order = mx.concatenate([order, mx.broadcast_to(tail, (order.shape[0], tail.size))], 1)
    return order[:, None, :, None]


def compaction_parts(model, batch: int) -> dict:
    """ms for every layer: compact() as it is; its indices only (one per layer); the gathers
    only, with one layer's indices shared; and the gathers as row copies ([B*H*L, D] taken)."""
    out = {"as_is": compaction_ms(model, batch)}
    cache = _holey(model, batch)
    start = time.perf_counter()
    mx.eval([_order(c) for c in cache])
    out["orders_only"] = 1e3 * (time.perf_counter() - start)
    idx = _order(cache[0])
    mx.eval(idx)
    start = time.perf_counter()
    moved = [
        (mx.take_along_axis(c.keys, idx, axis=2), mx.take_along_axis(c.values, idx, axis=2))
        for c in cache
    ]
    mx.eval(moved)
    out["gathers_shared_order"] = 1e3 * (time.perf_counter() - start)
    B, H, L, D = cache[0].keys.shape
    flat = ((mx.arange(B * H) * L).reshape(B, H, 1) + idx[:, :, :, 0]).reshape(-1)
    mx.eval(flat)
    start = time.perf_counter()
    moved = [
        (
            mx.take(c.keys.reshape(B * H * L, D), flat, axis=0).reshape(B, H, L, D),
            mx.take(c.values.reshape(B * H * L, D), flat, axis=0).reshape(B, H, L, D),
        )
        for c in cache
    ]
    mx.eval(moved)
    out["row_takes_shared_order"] = 1e3 * (time.perf_counter() - start)
    same = mx.array_equal(moved[0][0], mx.take_along_axis(cache[0].keys, idx, axis=2)).item()
    out["row_takes_equal"] = bool(same)
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in out.items()}


def roll_parts(batch: int) -> dict:
    """ms for 64 per-row rolls of a [batch, 8, 512, 128] bfloat16 buffer (a rollback of the
    8B's 32 layers, keys and values): mlx-lm's dynamic_roll against roll_positions."""
    from mlx_lm.models.cache import dynamic_roll

    from engine.cache.position_moves import roll_positions

    x = mx.random.normal((batch, 8, 512, 128)).astype(mx.bfloat16)
    shifts = mx.array([b % 5 for b in range(batch)])[:, None]
    mx.eval(x, shifts)
    out = {}
    for _ in range(2):  # the second pass is the one kept (the first compiles and warms)
        for name, roll in (
            ("dynamic_roll", lambda: dynamic_roll(x, shifts, axis=2)),
            ("roll_positions", lambda: roll_positions(x, shifts)),
        ):
            start = time.perf_counter()
            mx.eval([roll() for _ in range(64)])
            out[name] = round(1e3 * (time.perf_counter() - start), 3)
    return out


VARIANTS = (
    "even",
    "host-used-per-layer",
    "host-used-shared",
    "host-unused-32",
    "device-used-per-layer",
    "ragged",
    "ragged-shared",
    "ragged-no-holes",
)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="random:8b")
    p.add_argument("--json", default=None)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--batches", type=int, nargs="+", default=[4, 16])
    args = p.parse_args()
    model = load_model(args.model).model
    assert RaggedBatchKVCache  # the cache under test (prefilled by wide_probe._ours)
    rows = []
    for batch in args.batches:
        runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
        for _ in range(args.repeats):  # alternated
            for v in VARIANTS:
                runs[v].append(run(model, batch, v))
        for v in VARIANTS:
            row = dict(
                batch=batch,
                variant=v,
                ms=round(statistics.median(r["ms"] for r in runs[v]), 3),
                host_ms=round(statistics.median(r["host_ms"] for r in runs[v]), 3),
                all_ms=[round(r["ms"], 2) for r in runs[v]],
            )
            rows.append(row)
            print(json.dumps(row), flush=True)
    for batch in args.batches:
        for _ in range(args.repeats):
            row = dict(
                batch=batch, compaction=compaction_parts(model, batch), rolls=roll_parts(batch)
            )
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    mx.random.seed(0)
    main()
