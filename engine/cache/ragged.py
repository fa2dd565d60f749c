"""A batch KV cache whose rows can give back positions without moving any data.

mlx-lm's BatchKVCache keeps rows right-aligned and hides left padding with the mask. After a
verify round each row keeps a different number of the positions it wrote; rolling every row
into alignment moves the whole cache every round (its cost grows with the context). Here a row
instead marks its discarded positions as holes, which join the left padding in the attention mask
(built once per forward, only while holes exist), and RoPE positions come from each row's own `offset`, which counts only
real tokens. Keys are written with their RoPE already applied, so a hole changes nothing for
the positions after it. When holes take up too much of the buffer, `compact()` gathers each
row's real positions back into place (one move, now and then).
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
from mlx_lm.models.cache import BatchKVCache, KVCache

DEFAULT_COMPACT_FRACTION = 0.25  # compact when holes exceed this share of the buffer


class RaggedBatchKVCache(BatchKVCache):
    def __init__(self, left_padding: list[int]) -> None:
        super().__init__(left_padding)
        self.hole_spans: list[tuple[int, int, int]] = []  # (row, start, end) buffer positions
        self.holes = 0  # most hole positions in any row (for the compaction decision)

    @classmethod
    def from_batch(cls, cache: BatchKVCache) -> RaggedBatchKVCache:
        ragged = cls.__new__(cls)
        ragged.__dict__.update(cache.__dict__)
        ragged.hole_spans = []
        ragged.holes = 0
        return ragged

    # -- the mask: left padding and holes (built once per forward, from layer 0) ---------------

    def valid_map(self, length: int) -> mx.array:
        valid = _padding_map(self.left_padding, length)
        if self.hole_spans:
            holes = np.zeros((self.left_padding.shape[0], length), dtype=bool)
            for row, start, end in self.hole_spans:
                holes[row, start:end] = True
            valid = valid & ~mx.array(holes)
        return valid

    def make_mask(self, N: int, return_array: bool = False, **kwargs):
        if not self.hole_spans:
            return super().make_mask(N, return_array=return_array, **kwargs)
        start = self._idx
        rinds = mx.arange(start + N)
        linds = mx.arange(start, start + N)[:, None]
        causal = linds >= rinds[None]  # [N, start + N]
        keep = mx.concatenate(
            [self.valid_map(start), mx.ones((self.left_padding.shape[0], N), dtype=mx.bool_)],
            axis=1,
        )
        return causal[None, None] & keep[:, None, None, :]

    # -- giving positions back -------------------------------------------------------------------

    def rollback(self, surplus: list[int]) -> None:
        """Drop the last surplus[i] written positions of row i."""
        smallest = min(surplus)
        if smallest:
            self.trim(smallest)
            self.hole_spans = [
                (r, a, min(b, self._idx)) for r, a, b in self.hole_spans if a < self._idx
            ]
        extra = [s - smallest for s in surplus]
        if any(extra):
            for row, e in enumerate(extra):
                if e:
                    self.hole_spans.append((row, self._idx - e, self._idx))
            self.offset = self.offset - mx.array(extra)
            self.holes += max(extra)
        if self.holes > DEFAULT_COMPACT_FRACTION * max(self._idx, 1) and self.holes > 16:
            self.compact()

    def compact(self) -> None:
        """Move each row's real positions to the right end, holes to the left padding."""
        if self.keys is None or not self.hole_spans:
            self.hole_spans, self.holes = [], 0
            return
        valid = self.valid_map(self._idx)
        real = valid.astype(mx.int32).sum(axis=1)
        # stable order: holes (False) first, then real positions in their order
        order = mx.argsort(valid.astype(mx.int32) * (self._idx + 1) + mx.arange(self._idx)[None])
        idx = order[:, None, :, None]
        self.keys = mx.take_along_axis(self.keys[..., : self._idx, :], idx, axis=2)
        self.values = mx.take_along_axis(self.values[..., : self._idx, :], idx, axis=2)
        self.left_padding = self._idx - real
        self.hole_spans, self.holes = [], 0

    # -- batch membership ------------------------------------------------------------------------

    def filter(self, batch_indices) -> None:
        self.compact()
        super().filter(batch_indices)

    def extend(self, other: BatchKVCache) -> None:
        self.compact()
        if isinstance(other, RaggedBatchKVCache):
            other.compact()
        super().extend(other)

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
        self.hole_spans, self.holes = [], 0


def _padding_map(left_padding: mx.array, length: int) -> mx.array:
    return mx.arange(length)[None, :] >= left_padding[:, None]


def as_ragged(layers: list) -> list:
    """Batch caches with per-row holes where mlx-lm's plain BatchKVCache is used."""
    return [RaggedBatchKVCache.from_batch(c) if type(c) is BatchKVCache else c for c in layers]
