"""The prompt cache's RAM tier: stored entries (MLX arrays) in an LRU bounded in bytes."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import mlx.core as mx
import numpy as np

from engine.cache.layers import LayerInfo, LayerState

Key = tuple[str, tuple[int, ...]]  # (namespace key, token ids)


@dataclass
class StoredEntry:
    """One cached prefix: its layers' states under its namespace key and token ids. The arrays
    may still be unevaluated (lazy copies out of the batch cache) until the cache ticks."""

    ns_key: str
    tokens: tuple[int, ...]
    target: list[LayerState]
    draft: list[LayerState] | None
    superseded: bool = False  # a longer entry that serves it replaced it: not worth a write
    ids: np.ndarray = field(init=False, repr=False)
    target_info: list[LayerInfo] = field(init=False, repr=False)
    draft_info: list[LayerInfo] | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.ids = np.asarray(self.tokens, np.int64)
        self.target_info = [s.info() for s in self.target]
        self.draft_info = None if self.draft is None else [s.info() for s in self.draft]

    @property
    def key(self) -> Key:
        return (self.ns_key, self.tokens)

    @property
    def layers(self) -> list[LayerState]:
        return self.target + (self.draft or [])

    @property
    def nbytes(self) -> int:
        return sum(s.nbytes for s in self.layers)

    @property
    def trimmable(self) -> bool:
        return all(s.trimmable for s in self.layers)

    def layer_arrays(self) -> list[list[mx.array]]:
        """Each layer's arrays, for evaluating a layer at a time."""
        return [list(s.arrays.values()) for s in self.layers]


class RamTier:
    """Entries by (namespace, tokens), least recently used first, at most `limit` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = int(limit)
        self.used = 0
        self._entries: OrderedDict[Key, StoredEntry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Key) -> bool:
        return key in self._entries

    def entries(self, ns_key: str) -> list[StoredEntry]:
        return [e for (k, _), e in self._entries.items() if k == ns_key]

    def insert(self, entry: StoredEntry) -> bool:
        """Store (or replace) an entry, evicting the least recently used; False when the
        entry alone is larger than the limit (then it is not stored)."""
        self.drop(entry.key)
        nbytes = entry.nbytes
        if nbytes > self.limit:
            return False
        self._entries[entry.key] = entry
        self.used += nbytes
        while self.used > self.limit:
            self.drop(next(iter(self._entries)))
        return True

    def drop(self, key: Key) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self.used -= old.nbytes

    def drop_prefixes_of(self, entry: StoredEntry) -> None:
        """Drop the entries of its namespace whose tokens are a strict prefix of its own."""
        n = len(entry.tokens)
        for key in list(self._entries):
            ns_key, toks = key
            if ns_key == entry.ns_key and len(toks) < n and entry.tokens[: len(toks)] == toks:
                self._entries[key].superseded = True
                self.drop(key)

    def touch(self, key: Key) -> None:
        if key in self._entries:
            self._entries.move_to_end(key)

    def clear(self) -> int:
        """Drop everything; returns the bytes the entries held."""
        freed = self.used
        self._entries.clear()
        self.used = 0
        return freed
