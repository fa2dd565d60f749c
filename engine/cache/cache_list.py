"""mlx-lm's CacheList (several caches for one layer, e.g. falcon_h1's recurrent state beside its
attention keys) seen through: what the engine does to a layer's cache it does to each member."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import ArraysCache, CacheList


def leaves(layers: list[Any] | None) -> Iterator[Any]:
    """Every cache of `layers`, the members of a CacheList in its place."""
    for layer in layers or ():
        if isinstance(layer, CacheList):
            yield from leaves(list(layer.caches))
        else:
            yield layer


def map_leaves(layers: list[Any], fn: Callable[[Any], Any]) -> list[Any]:
    """`layers` with every leaf cache replaced by fn(leaf), CacheLists rebuilt around them."""
    out = []
    for layer in layers:
        if isinstance(layer, CacheList):
            layer.caches = tuple(map_leaves(list(layer.caches), fn))
            out.append(layer)
        else:
            out.append(fn(layer))
    return out


CACHE_FIELDS = ("keys", "values", "offset", "left_padding")


def cache_arrays(layers: list[Any]) -> list[mx.array]:
    """Every array a batch cache holds. A rollback's ops (which differ from round to round) are
    evaluated on their own, so the next forward's graph is the same every round: MLX's CUDA
    backend reuses a CUDA graph only while the ops it holds repeat, and the rollback's ops
    would otherwise shift every later one into new graphs (engine/core/batch.py, rollback;
    docs/benchmarks.md, "Hybrid speculation without replay")."""
    out = []
    for layer in leaves(layers):
        if isinstance(layer, ArraysCache):
            out.extend(a for a in layer.cache if isinstance(a, mx.array))
            continue
        for name in CACHE_FIELDS:
            value = layer.__dict__.get(name)
            if isinstance(value, mx.array):
                out.append(value)
            elif isinstance(value, tuple):  # quantized keys / values: (data, scales, biases)
                out.extend(a for a in value if isinstance(a, mx.array))
    return out
