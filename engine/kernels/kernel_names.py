"""Names for Tandem's CUDA kernels that change whenever their source does.

MLX's CUDA backend keeps each kernel it compiles on disk (engine/kernels/compiled_cache.py: a
folder Tandem keeps across runs and upgrades) under the kernel's name and template arguments
only, and loads it again by that name, never compiling again. A kernel whose source changed
under the same name would therefore run its old compiled code, silently, in every later process.
A digest of the source in the name keeps the two apart.
"""

from __future__ import annotations

import hashlib

DEFAULT_DIGEST_CHARS = 12  # hex digits of the source's SHA-256 in the name


def versioned_name(base: str, *sources: str) -> str:
    """`base` followed by a digest of everything MLX compiles into the kernel (its source and any
    header): the name MLX caches the compiled kernel under."""
    digest = hashlib.sha256("\0".join(sources).encode()).hexdigest()[:DEFAULT_DIGEST_CHARS]
    return f"{base}_{digest}"
