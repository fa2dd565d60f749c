"""Tandem's engine: MLX only, never Qt. Import `engine.api` for the public door.

Importing this package interposes OpenBLAS before MLX loads (Linux CPU), so import `engine`
before anything imports `mlx.core`.
"""

from engine import blas as _blas

_blas.interpose()
