"""Moving each row's cache positions along the sequence axis, the same way for every head.

A batch cache [B, H, L, D] (keys, values, or a quantized cache's parts) is reordered per row
when rows give positions back: compaction gathers a row's real positions (engine/cache/ragged.py)
and a per-row rollback rolls a row right by its surplus (engine/speculative/rollback.py). MLX's
`take_along_axis` with indices broadcast over heads and values (as mlx-lm's `dynamic_roll` does)
computes every element's index on its own; seen as [B * H * L, D] the same move takes whole rows
of D values, each once. A compaction of every layer of the default model took 17 ms against 44
at four rows and 60 against 163 at sixteen on the 2-core CPU; the 8B's gathers at sixteen rows
4.6-4.8 ms against 13.7 on an H100, and its rolls half the time there (docs/benchmarks.md,
twenty-eighth pass).
"""

from __future__ import annotations

import math

import mlx.core as mx


def take_positions(x: mx.array, order: mx.array) -> mx.array:
    """x [B, ..., L, D] with row b's positions in the order `order[b]` [L] gives, alike for
    every index between the row and the sequence axes."""
    B, L, D = x.shape[0], x.shape[-2], x.shape[-1]
    heads = math.prod(x.shape[1:-2])
    index = mx.int32 if B * heads * L < 2**31 else mx.int64  # a row index must not wrap
    starts = (mx.arange(B * heads, dtype=index) * L).reshape(B, heads, 1)
    rows = (starts + order.astype(index)[:, None, :]).reshape(-1)
    return mx.take(x.reshape(B * heads * L, D), rows, axis=0).reshape(x.shape)


def roll_positions(x: mx.array, shifts: mx.array) -> mx.array:
    """x [B, ..., L, D] with row b rolled right by shifts[b] (shifts [B] or [B, 1]) along the
    sequence axis: for a cache [B, H, L, D], what mlx-lm's `dynamic_roll(x, shifts, axis=2)`
    computes."""
    L = x.shape[-2]
    order = (mx.arange(L)[None] - shifts.reshape(-1, 1)) % L
    return take_positions(x, order)
