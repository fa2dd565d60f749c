"""Tandem's engine: MLX only, never Qt. Import `engine.api` for the public door.

Importing this package interposes OpenBLAS before MLX loads (Linux CPU), so import `engine`
before anything imports `mlx.core`.
"""

import os as _os

# Tandem never downloads: set before anything imports huggingface_hub or transformers.
_os.environ.setdefault("HF_HUB_OFFLINE", "1")

from engine import blas as _blas  # noqa: E402

_blas.interpose()
