"""KV cache storage beyond one request: the prefix cache (RAM + disk) and its pieces."""

from engine.cache.namespace import FORMAT_VERSION, CacheNamespace
from engine.cache.prefix_cache import (
    DEFAULT_DISK_BYTES,
    DEFAULT_DISK_DIR,
    DEFAULT_RAM_BYTES,
    CacheMatch,
    PrefixCache,
)

__all__ = [
    "DEFAULT_DISK_BYTES",
    "DEFAULT_DISK_DIR",
    "DEFAULT_RAM_BYTES",
    "FORMAT_VERSION",
    "CacheMatch",
    "CacheNamespace",
    "PrefixCache",
]
