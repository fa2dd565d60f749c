"""A batch KV cache whose rows can give back positions without moving any data.

mlx-lm's BatchKVCache keeps rows right-aligned and hides left padding with the mask. After a
verify round each row keeps a different number of the positions it wrote; rolling every row
into alignment moves the whole cache every round (its cost grows with the context). Here a row
instead marks its discarded positions as holes: a per-row `valid` map joins the left padding in
the attention mask, and RoPE positions come from each row's own `offset`, which counts only
real tokens. Keys are written with their RoPE already applied, so a hole changes nothing for
the positions after it. When holes take up too much of the buffer, `compact()` gathers each
row's real positions back into place (one move, now and then).
"""

from __future__ import annotations

import mlx.core as mx
from mlx_lm.models.cache import BatchKVCache, KVCache

DEFAULT_COMPACT_FRACTION = 0.25  # compact when holes exceed this share of the buffer


class RaggedBatchKVCache(BatchKVCache):
    def __init__(self, left_padding: list[int]) -> None:
        super().__init__(left_padding)
        self.valid: mx.array | None = None  # [B, positions] bool, positions >= _idx
        self.holes = 0  # most holes in any row (for the compaction decision)

    @classmethod
    def from_batch(cls, cache: BatchKVCache) -> RaggedBatchKVCache:
        ragged = cls.__new__(cls)
        ragged.__dict__.update(cache.__dict__)
        ragged.valid = _padding_map(cache.left_padding, cache._idx)
        ragged.holes = 0
        return ragged

    # -- writing and reading ---------------------------------------------------------------------

    def update_and_fetch(self, keys: mx.array, values: mx.array):
        start = self._idx
        out = super().update_and_fetch(keys, values)
        n = keys.shape[2]
        fresh = mx.ones(
            (self.valid.shape[0] if self.valid is not None else keys.shape[0], n), dtype=mx.bool_
        )
        self.valid = (
            fresh if self.valid is None else mx.concatenate([self.valid[:, :start], fresh], axis=1)
        )
        return out

    def make_mask(self, N: int, return_array: bool = False, **kwargs):
        start = self._idx
        rinds = mx.arange(start + N)
        linds = mx.arange(start, start + N)[:, None]
        causal = linds >= rinds[None]  # [N, start + N]
        valid = self.valid[:, :start] if self.valid is not None else None
        if valid is None or start == 0:
            keep = mx.ones((self.left_padding.shape[0], start + N), dtype=mx.bool_)
        else:
            keep = mx.concatenate([valid, mx.ones((valid.shape[0], N), dtype=mx.bool_)], axis=1)
        return causal[None, None] & keep[:, None, None, :]

    # -- giving positions back -------------------------------------------------------------------

    def rollback(self, surplus: list[int]) -> None:
        """Drop the last surplus[i] written positions of row i."""
        smallest = min(surplus)
        extra = [s - smallest for s in surplus]
        if smallest:
            self.trim(smallest)
            self.valid = self.valid[:, : self._idx]
        if any(extra):
            cols = mx.arange(self._idx)[None, :]
            cut = mx.array([self._idx - e for e in extra])[:, None]
            self.valid = self.valid & (cols < cut)
            self.offset = self.offset - mx.array(extra)
            self.holes += max(extra)
        if self.holes > DEFAULT_COMPACT_FRACTION * max(self._idx, 1) and self.holes > 16:
            self.compact()

    def compact(self) -> None:
        """Move each row's real positions to the right end, holes to the left padding."""
        if self.keys is None or self.holes == 0:
            return
        valid = self.valid[:, : self._idx]
        real = valid.astype(mx.int32).sum(axis=1)
        # stable order: holes (False) first, then real positions in their order
        order = mx.argsort(valid.astype(mx.int32) * (self._idx + 1) + mx.arange(self._idx)[None])
        idx = order[:, None, :, None]
        self.keys = mx.take_along_axis(self.keys[..., : self._idx, :], idx, axis=2)
        self.values = mx.take_along_axis(self.values[..., : self._idx, :], idx, axis=2)
        self.left_padding = self._idx - real
        self.valid = _padding_map(self.left_padding, self._idx)
        self.holes = 0

    # -- batch membership ------------------------------------------------------------------------

    def filter(self, batch_indices) -> None:
        self.compact()
        super().filter(batch_indices)
        self.valid = _padding_map(self.left_padding, self._idx)

    def extend(self, other: BatchKVCache) -> None:
        self.compact()
        super().extend(other)
        self.valid = _padding_map(self.left_padding, self._idx)

    def extract(self, idx: int) -> KVCache:
        self.compact()
        return super().extract(idx)

    @property
    def state(self):
        self.compact()
        return super().state

    @state.setter
    def state(self, v):
        self.keys, self.values, self.offset, self.left_padding, self._idx = v
        self.valid = _padding_map(self.left_padding, self._idx)
        self.holes = 0


def _padding_map(left_padding: mx.array, length: int) -> mx.array:
    return mx.arange(length)[None, :] >= left_padding[:, None]


def as_ragged(layers: list) -> list:
    """Batch caches with per-row holes where mlx-lm's plain BatchKVCache is used."""
    return [RaggedBatchKVCache.from_batch(c) if type(c) is BatchKVCache else c for c in layers]
