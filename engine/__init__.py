"""Tandem's engine: MLX only, never Qt. Import `engine.api` for the public door.

Importing this package interposes OpenBLAS before MLX loads (Linux CPU), so import `engine`
before anything imports `mlx.core`.
"""

import os as _os

# Tandem never downloads: set before anything imports huggingface_hub or transformers.
_os.environ.setdefault("HF_HUB_OFFLINE", "1")
# On CUDA, MLX runs attention over several query tokens through cuDNN, which builds a graph for
# every new shape (about 100 ms each on the H200) and reads this once. A verify round's shapes
# change as rows join and finish, so those builds cost more than the whole round; the unfused
# path has no such cost. Set it to 1 to get cuDNN back (docs/benchmarks.md).
_os.environ.setdefault("MLX_CUDA_USE_CUDNN_SDPA", "0")

from engine import blas as _blas  # noqa: E402

_blas.interpose()
