"""Keeps `mx.fast.rope` inside CUDA's launch limits on MLX's CUDA backend.

MLX's CUDA RoPE (mlx/backend/cuda/rope.cu, 0.32.4 and its main branch of 2026-08) launches a grid
over (dims / 2, T, B * ceil(N / 4)) with blocks from `get_block_dims_common`, which can give the
z axis up to 1024 threads where CUDA allows 64. It happens when few rotary dimensions meet one
token per row and many rows times heads: a rotary part of 16 dimensions with 32 heads fails at 16
rows of one token each ("cudaGraphAddKernelNode ... invalid argument"), as Qwen3.5-shaped models
with a small head did in our batch of 16. `install()` wraps `mx.fast.rope` so that such a call
runs as several calls over slices of the batch (each within the limit) and is concatenated: every
element is computed by the same kernel as before, so results are unchanged.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import mlx.core as mx

from engine.kernels.switch import may_install

DISABLE_ENV = "TANDEM_NO_ROPE_GUARD"
MAX_BLOCK_Z = 64  # CUDA's limit on blockDim.z
BLOCK_POW2 = 10  # MLX's blocks hold at most 2**10 threads
ROWS_PER_THREAD = 4  # MLX's RoPE kernel: heads per thread along z
SAFE_DIMS = 32  # 16 rotary pairs or more take 2**4 threads along x: z never passes 64


def block_dims(dim0: int, dim1: int, dim2: int) -> tuple[int, int, int]:
    """MLX's `get_block_dims_common` (mlx/backend/common/utils.cpp), as the CUDA RoPE uses it."""
    pows, total = [0, 0, 0], 0
    while True:
        before = total
        for axis, dim in enumerate((dim0, dim1, dim2)):
            if dim >= 1 << (pows[axis] + 1):
                pows[axis] += 1
                total += 1
            if total == BLOCK_POW2:
                return 1 << pows[0], 1 << pows[1], 1 << pows[2]
        if total == before:
            return 1 << pows[0], 1 << pows[1], 1 << pows[2]


def _launch_z(rows: int, heads: int, tokens: int, dims: int) -> int:
    return block_dims(dims // 2, tokens, rows * math.ceil(heads / ROWS_PER_THREAD))[2]


@functools.lru_cache(maxsize=4096)
def rows_per_call(shape: tuple[int, ...], dims: int) -> int | None:
    """How many rows of the batch one RoPE call may take on CUDA (None: all of them). Cached:
    it runs for every RoPE call of every layer, where a step's host time counts."""
    if len(shape) < 3 or shape[0] <= 1:
        return None
    rows, tokens = shape[0], shape[-2]
    heads = math.prod(shape[1:-2])
    if _launch_z(rows, heads, tokens, dims) <= MAX_BLOCK_Z:
        return None
    per_call = rows
    while per_call > 1 and _launch_z(per_call, heads, tokens, dims) > MAX_BLOCK_Z:
        per_call = per_call // 2
    return per_call


def make_guard(original: Callable[..., mx.array]) -> Callable[..., mx.array]:
    """A drop-in `mx.fast.rope` that splits calls CUDA would refuse to launch."""

    def rope(a: mx.array, dims: int, *args: Any, offset: Any = 0, **kwargs: Any) -> mx.array:
        shape = a.shape
        per_call = rows_per_call(tuple(shape), dims) if shape[0] > 1 and dims < SAFE_DIMS else None
        if per_call is None:
            return original(a, dims, *args, offset=offset, **kwargs)
        batched_offset = isinstance(offset, mx.array) and offset.ndim == 1 and offset.size > 1
        parts = []
        for start in range(0, a.shape[0], per_call):
            stop = min(start + per_call, a.shape[0])
            part_offset = offset[start:stop] if batched_offset else offset
            parts.append(original(a[start:stop], dims, *args, offset=part_offset, **kwargs))
        return mx.concatenate(parts, axis=0)

    rope.tandem_original = original  # type: ignore[attr-defined]
    return rope


def is_installed() -> bool:
    return hasattr(mx.fast.rope, "tandem_original")


def needs_guard(model: Any) -> bool:
    """Whether some RoPE of `model` rotates fewer than SAFE_DIMS dimensions (only those can
    meet the bad launch; the guard costs every RoPE call about a microsecond of host time)."""
    return any(
        "rope" in type(m).__name__.lower() and 0 < int(getattr(m, "dims", SAFE_DIMS)) < SAFE_DIMS
        for _, m in model.named_modules()
    )


def install_for(model: Any) -> bool:
    """`install()` when `model` needs the guard (on CUDA)."""
    return needs_guard(model) and install()


def install(*, force: bool = False) -> bool:
    """Wrap `mx.fast.rope` on MLX's CUDA backend (or anywhere, with `force`, for tests)."""
    if not may_install(DISABLE_ENV, needs_cuda_kernel=False, force=force):
        return False
    if not is_installed():
        mx.fast.rope = make_guard(mx.fast.rope)
    return True


def uninstall() -> None:
    if is_installed():
        mx.fast.rope = mx.fast.rope.tandem_original
