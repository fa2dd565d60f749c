"""Whether a kernel module may take over an MLX or mlx-lm function here: on a CUDA GPU only,
unless its environment variable turns it off."""

from __future__ import annotations

import os

import mlx.core as mx

from engine.device import on_cuda


def is_set(env: str) -> bool:
    """The user set `env` to anything but empty or "0" (an off switch, or an opt-in)."""
    return os.environ.get(env, "") not in ("", "0")


def may_install(env: str, *, needs_cuda_kernel: bool = True, force: bool = False) -> bool:
    """Not turned off, and (unless `force`, for tests) the default device is a CUDA GPU whose
    MLX can compile custom kernels when the module has one."""
    if is_set(env):  # the user keeps MLX's own path
        return False
    if force:
        return True
    return on_cuda() and (not needs_cuda_kernel or hasattr(mx.fast, "cuda_kernel"))
