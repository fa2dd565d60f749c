"""Interpose OpenBLAS over the reference BLAS bundled in the mlx-cpu wheel (Linux only).

mlx-cpu ships a slow reference BLAS; loading Debian's OpenBLAS with RTLD_GLOBAL before the first
`import mlx.core` makes MLX's cblas calls resolve to it (a 2048^2 fp32 matmul: 3.6 s -> 0.1 s).
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)

DEFAULT_OPENBLAS_PATHS = (
    "/usr/lib/x86_64-linux-gnu/libopenblas.so.0",
    "/usr/lib/aarch64-linux-gnu/libopenblas.so.0",
    "/usr/lib64/libopenblas.so.0",
    "/usr/lib/libopenblas.so.0",
)
BUNDLED_OPENBLAS = "libopenblas.so.0"


@dataclass
class BlasInfo:
    name: str
    path: str | None
    reason: str


_info: BlasInfo | None = None


def interpose() -> BlasInfo:
    """Load OpenBLAS globally if we are on Linux and MLX is not loaded yet. Idempotent."""
    global _info
    if _info is not None:
        return _info
    if not sys.platform.startswith("linux"):
        _info = BlasInfo("platform default", None, f"not Linux ({sys.platform})")
    elif os.environ.get("TANDEM_NO_OPENBLAS"):
        _info = BlasInfo("bundled reference BLAS", None, "TANDEM_NO_OPENBLAS is set")
    elif "mlx.core" in sys.modules and "libopenblas" not in os.environ.get("LD_PRELOAD", ""):
        _info = BlasInfo("bundled reference BLAS", None, "mlx.core was imported before engine")
    else:
        _info = _load_openblas()
    return _info


def _load_openblas() -> BlasInfo:
    preload = os.environ.get("LD_PRELOAD", "")
    if "libopenblas" in preload:
        return BlasInfo("OpenBLAS", preload, "LD_PRELOAD")
    for path in _openblas_paths():
        if os.path.exists(path):
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            except OSError as exc:
                return BlasInfo("bundled reference BLAS", None, f"could not load {path}: {exc}")
            return BlasInfo("OpenBLAS", path, "interposed in process")
    return BlasInfo(
        "bundled reference BLAS",
        None,
        "OpenBLAS not found; install Debian's libopenblas0-pthread (make setup does)",
    )


def _openblas_paths() -> list[str]:
    """The copy inside a PyInstaller bundle (packaging/bundle_contents.py) first, then the system's."""
    bundled = (
        [os.path.join(sys._MEIPASS, BUNDLED_OPENBLAS)] if getattr(sys, "frozen", False) else []
    )
    return bundled + list(DEFAULT_OPENBLAS_PATHS)


def info() -> BlasInfo:
    return interpose()


def log_blas(*, measure: bool = True) -> BlasInfo:
    """Log which BLAS MLX uses, with a one-line matmul timing as proof."""
    blas = info()
    if not measure:
        log.info("BLAS: %s (%s)", blas.name, blas.reason)
        return blas
    import mlx.core as mx

    with mx.stream(mx.cpu):
        a = mx.random.normal((1024, 1024))
        mx.eval(a)
        start = time.perf_counter()
        mx.eval(a @ a)
        seconds = time.perf_counter() - start
    log.info(
        "BLAS: %s (%s); 1024x1024 fp32 matmul %.1f ms (reference BLAS ~500 ms)",
        blas.name,
        blas.reason,
        seconds * 1e3,
    )
    return blas
