"""MLX's own kernels for a while: the baselines of a benchmark run as mlx-lm ships them.

Tandem's CUDA kernels take over process-wide functions (`nn.Linear.__call__`,
`mx.fast.scaled_dot_product_attention`, ...), so mlx-lm's BatchGenerator and `generate` in the same
process would run on them too. A benchmark against mlx-lm means mlx-lm as its users run it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

from engine.compiled_mlp import uncompiled_mlps
from engine.fused_projections import separate_projections
from engine.kernels import (
    depthwise_conv_cuda,
    gated_delta_cuda,
    skinny_matmul_cuda,
    verify_attention_cuda,
)

# the kernels that only make things faster (rope_cuda_guard stays: it mends a failing launch)
SPEED_KERNELS = (skinny_matmul_cuda, verify_attention_cuda, depthwise_conv_cuda, gated_delta_cuda)


@contextmanager
def mlx_as_shipped(*, enabled: bool = True) -> Iterator[None]:
    """Within the block, MLX's own functions; afterwards, the kernels that were in place."""
    installed = [k for k in SPEED_KERNELS if enabled and k.is_installed()]
    for kernel in installed:
        kernel.uninstall()
    try:
        # q/k/v and gate/up apart and MLPs uncompiled, as mlx-lm's model has them
        with separate_projections() if enabled else nullcontext():
            with uncompiled_mlps() if enabled else nullcontext():
                yield
    finally:
        for kernel in installed:
            kernel.install(force=True)  # it was in place: put it back as it was
