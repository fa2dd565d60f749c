"""KV cache storage beyond one request: the prompt cache (RAM + disk) and its pieces."""

from engine.cache.namespace import FORMAT_VERSION, CacheNamespace
from engine.cache.prompt_cache import LOADING, CacheMatch, PromptCache
from engine.cache.settings import (
    DEFAULT_DISK_BYTES,
    DEFAULT_RAM_BYTES,
    PromptCacheSettings,
)

__all__ = [
    "DEFAULT_DISK_BYTES",
    "DEFAULT_RAM_BYTES",
    "FORMAT_VERSION",
    "LOADING",
    "CacheMatch",
    "CacheNamespace",
    "PromptCache",
    "PromptCacheSettings",
]
