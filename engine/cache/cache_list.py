"""mlx-lm's CacheList (several caches for one layer, e.g. falcon_h1's recurrent state beside its
attention keys) seen through: what the engine does to a layer's cache it does to each member."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from mlx_lm.models.cache import CacheList


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
