"""The CUDA RoPE launch guard (engine/kernels/rope_cuda_guard.py): it splits exactly the calls
MLX's CUDA backend cannot launch, and a split call gives the same numbers as one call."""

from __future__ import annotations

import mlx.core as mx
import pytest

from engine.kernels import rope_cuda_guard as guard


def test_block_dims_follow_mlx():
    # 8 rotary pairs, one token, 16 rows x 32 heads: MLX asks for 128 threads along z
    assert guard.block_dims(8, 1, 128) == (8, 1, 128)
    assert guard.block_dims(32, 1, 128) == (32, 1, 32)
    assert guard.block_dims(8, 5, 64) == (8, 4, 32)


@pytest.mark.parametrize(
    ("shape", "dims", "expected"),
    [
        ((16, 32, 1, 64), 16, 8),  # the Qwen3.5-shaped batch of 16 that failed on the H200
        ((8, 32, 1, 64), 16, None),
        ((16, 32, 5, 64), 16, None),  # five tokens per row take threads along y instead
        ((32, 32, 1, 64), 64, None),  # a full head of 64 rotary dimensions fits
        ((64, 32, 1, 64), 16, 8),
        ((1, 32, 1, 64), 16, None),
    ],
)
def test_rows_per_call(shape, dims, expected):
    assert guard.rows_per_call(shape, dims) == expected
    if expected is not None:
        assert guard._launch_z(expected, shape[1], shape[2], dims) <= guard.MAX_BLOCK_Z


@pytest.mark.parametrize("offset", ["rows", "scalar"])
def test_split_call_equals_one_call(offset):
    mx.random.seed(0)
    x = mx.random.normal((16, 32, 1, 64))
    off = mx.arange(16) * 7 + 3 if offset == "rows" else 11
    rope = guard.make_guard(mx.fast.rope)
    kwargs = dict(traditional=False, base=10000.0, scale=1.0, offset=off)
    want = mx.fast.rope(x, 16, **kwargs)
    got = rope(x, 16, **kwargs)
    assert mx.array_equal(got, want).item()


def test_install_wraps_and_uninstall_restores():
    original = mx.fast.rope
    try:
        assert guard.install(force=True)
        assert guard.is_installed() and mx.fast.rope is not original
        guard.install(force=True)  # idempotent
        assert mx.fast.rope.tandem_original is original
    finally:
        guard.uninstall()
    assert mx.fast.rope is original


def test_only_models_with_few_rotary_dimensions_need_the_guard():
    import mlx.nn as nn

    class Attention(nn.Module):
        def __init__(self, dims: int) -> None:
            super().__init__()
            self.rope = nn.RoPE(dims)

    assert guard.needs_guard(Attention(16))  # Qwen3.5's share of a small head
    assert not guard.needs_guard(Attention(64))  # SmolLM2, Llama: whole heads of 64 or more
