"""Where MLX's CUDA backend keeps the kernels it compiles while running (NVRTC output).

MLX compiles many kernels at run time on CUDA (fused elementwise graphs, custom kernels such as
our gated-delta recurrence) and keeps what it compiled under the system's temporary folder unless
`MLX_PTX_CACHE_DIR` names another. Many systems empty that folder at boot, and every session's
first model then compiles again: on the H200 a benchmark of the random 1B hybrid took 59 s from
start to exit with an empty cache and 27 s with a full one (docs/benchmarks.md). Tandem keeps them
in its user cache folder instead, one folder per MLX version and GPU architecture (MLX names the
entries by kernel and shape only, so two architectures must never share a folder). Folders and
files no current build loads are removed once unused for a while (engine/kernels/stale_kernels.py).
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import mlx.core as mx

from engine.device import cuda_available
from engine.kernels.stale_kernels import mark_used

log = logging.getLogger(__name__)

PTX_CACHE_ENV = "MLX_PTX_CACHE_DIR"  # MLX's own variable; a value already set is kept
DEFAULT_FOLDER = "cuda-kernels"


def compiled_kernel_folder(cache_root: Path, *, mlx_version: str, architecture: str) -> Path:
    """The folder for one MLX version on one GPU architecture, under `cache_root`."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", architecture).strip("_") or "gpu"
    return cache_root / DEFAULT_FOLDER / f"mlx-{mlx_version}" / safe


def keep_compiled_kernels(cache_root: Path) -> Path | None:
    """Point MLX's CUDA kernel cache at Tandem's cache folder, before anything is compiled. Returns
    the folder, or None where it changes nothing: no CUDA, `MLX_PTX_CACHE_DIR` already set (the
    user's choice), a GPU MLX does not name, or a folder that cannot be made (MLX then keeps its
    temporary one). Never raises: the engine thread calls it first thing."""
    if os.environ.get(PTX_CACHE_ENV) or not cuda_available():
        return None
    try:
        info = mx.device_info()
        architecture = str(info.get("architecture") or info.get("device_name") or "")
        if not architecture:  # entries of two architectures must never mix: better none
            raise ValueError("MLX does not name this GPU's architecture")
        folder = compiled_kernel_folder(
            cache_root, mlx_version=mx.__version__, architecture=architecture
        )
        folder.mkdir(parents=True, exist_ok=True)
    except Exception as exc:  # noqa: BLE001 - MLX keeps its own folder; the engine goes on
        log.warning("compiled CUDA kernels stay in MLX's temporary folder: %s", exc)
        return None
    os.environ[PTX_CACHE_ENV] = str(folder)
    mark_used(folder)  # its age decides when another version prunes it
    return folder
