"""Per-row moves of cache positions (engine/cache/position_moves.py) against what MLX and
mlx-lm compute element by element: the same arrays, bit for bit."""

from __future__ import annotations

import mlx.core as mx
import pytest
from mlx_lm.models.cache import dynamic_roll

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine.cache.position_moves import roll_positions, take_positions


@pytest.mark.parametrize(
    "shape, dtype",
    [
        ((3, 4, 9, 8), mx.float32),
        ((2, 1, 5, 6), mx.bfloat16),
        ((4, 2, 7, 3), mx.uint32),  # a quantized cache's packed part
        ((2, 3, 2, 5, 4), mx.float16),  # more than one axis between rows and positions
    ],
)
def test_moves_match_mlx_elementwise_gathers(shape, dtype):
    B, L = shape[0], shape[-2]
    x = (mx.random.uniform(shape=shape, key=mx.random.key(3)) * 1000).astype(dtype)
    order = mx.stack([mx.random.permutation(L, key=mx.random.key(10 + b)) for b in range(B)])
    expand = order.reshape((B,) + (1,) * (len(shape) - 3) + (L, 1))
    assert mx.array_equal(take_positions(x, order), mx.take_along_axis(x, expand, axis=-2))
    shifts = mx.array([(2 * b + 1) % L for b in range(B)])
    if len(shape) == 4:  # as the engine called mlx-lm's: shifts [B, 1], the sequence axis 2
        rolled = dynamic_roll(x, shifts[:, None], axis=2)
    else:
        back = (mx.arange(L)[None] - shifts[:, None]) % L
        rolled = mx.take_along_axis(x, back.reshape(expand.shape), axis=-2)
    assert mx.array_equal(roll_positions(x, shifts), rolled)
    assert mx.array_equal(roll_positions(x, shifts[:, None]), rolled)
