"""What MLX runs on here: the facts that change how the engine shapes its work."""

from __future__ import annotations

import mlx.core as mx


def cuda_available() -> bool:
    """Whether MLX runs on CUDA here (builds for Metal or the CPU may lack `mx.cuda`)."""
    cuda = getattr(mx, "cuda", None)
    return cuda is not None and bool(cuda.is_available())


def on_gpu() -> bool:
    """The default device is a GPU (Metal or CUDA), not the CPU."""
    return mx.default_device().type == mx.DeviceType.gpu


def on_cuda() -> bool:
    """The default device is a CUDA GPU (where each new forward shape costs a graph build)."""
    return on_gpu() and cuda_available()
