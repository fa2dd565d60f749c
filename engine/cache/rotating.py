"""A sliding-window batch cache whose masks describe the keys they mask.

mlx-lm's BatchRotatingKVCache writes one-token steps into a rotating buffer, and a multi-token
update first puts the buffer back in temporal order and trims it. Its `make_mask`, called before
that update, works from the wrapped write index instead, so after a plain step has rotated the
buffer, a verify forward's mask is one position off the keys: a left-padded row loses its oldest
real token. Here a multi-token forward's mask is made from the ordered buffer (ordering it, which
the update would do first anyway), so mask and keys always agree.
"""

from __future__ import annotations

from mlx_lm.models.cache import BatchRotatingKVCache

from engine.cache import mlx_lm_private as private


class OrderedBatchRotatingKVCache(BatchRotatingKVCache):
    """BatchRotatingKVCache with masks made from the same ordered state as the keys."""

    @classmethod
    def from_batch(cls, cache: BatchRotatingKVCache) -> OrderedBatchRotatingKVCache:
        ordered = cls.__new__(cls)
        ordered.__dict__.update(cache.__dict__)
        return ordered

    def make_mask(self, N: int, window_size: int | None = None, return_array: bool = False):
        if N > 1:
            private.rotating_temporal_order(self)
        return super().make_mask(N, window_size=window_size, return_array=return_array)
