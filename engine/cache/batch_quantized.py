"""A batched, quantized KV cache: mlx-lm's BatchKVCache layout with QuantizedKVCache storage.

Rows are left-padded as in `BatchKVCache`: row i holds its `offset[i]` positions at
`left_padding[i] .. _idx - 1` of a buffer shared by the batch. Keys and values are stored as
mlx-lm's quantized triples (data uint32 packed along the head dim, scales, biases), each laid out
[B, heads, positions, *]: the sequence axis is axis 2 for all three, so rolls, pads, slices and
filters act on all three the same way. The `group_size` / `bits` attributes make mlx-lm's
attention (`models/base.py: scaled_dot_product_attention`) take its quantized path.

New keys and values are quantized (`mx.quantize`, one group per `group_size` head-dim values of
one position) before attention sees them, exactly as `QuantizedKVCache.update_and_fetch` does,
so a position's stored values never depend on which forward wrote it or how it was batched.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from mlx.utils import tree_map, tree_reduce
from mlx_lm.models.base import create_causal_mask
from mlx_lm.models.cache import (
    BatchKVCache,
    KVCache,
    QuantizedKVCache,
)

from engine.cache import mlx_lm_private as private
from engine.cache import row_groups
from engine.cache.position_moves import roll_positions

Quantized = tuple[mx.array, mx.array, mx.array]


def _quantize(x: mx.array, group_size: int, bits: int) -> Quantized:
    return tuple(mx.quantize(x, group_size=group_size, bits=bits))


def _empty_parts(like: Quantized, rows: int) -> Quantized:
    """Zero-length parts with `like`'s heads, trailing dims and dtypes."""
    return tuple(mx.zeros((rows, p.shape[1], 0, p.shape[3]), dtype=p.dtype) for p in like)


class BatchQuantizedKVCache(row_groups.PaddingStarts, private.BaseCache):
    step = 256

    def __init__(self, left_padding: list[int], group_size: int = 64, bits: int = 8) -> None:
        self.keys: Quantized | None = None
        self.values: Quantized | None = None
        self.left_padding = mx.array(left_padding)
        self.offset = mx.array([-p for p in left_padding])
        self.written = 0
        self.right_padding: mx.array | None = None
        self.group_size = group_size
        self.bits = bits

    # -- conversions ---------------------------------------------------------------------------

    @classmethod
    def from_batch(
        cls, cache: BatchKVCache, group_size: int = 64, bits: int = 8
    ) -> BatchQuantizedKVCache:
        """Quantize a BatchKVCache (its first `_idx` positions; spare capacity is dropped)."""
        if hasattr(cache, "compact"):  # a ragged cache: close its holes first
            cache.compact()
        out = cls([], group_size=group_size, bits=bits)
        out.left_padding = cache.left_padding
        out.offset = cache.offset
        out.written = private.write_index(cache)
        out.right_padding = private.right_padding(cache)
        if cache.keys is not None:
            out.keys = _quantize(cache.keys[..., : private.write_index(cache), :], group_size, bits)
            out.values = _quantize(
                cache.values[..., : private.write_index(cache), :], group_size, bits
            )
        return out

    @classmethod
    def merge(
        cls, caches: list[Any], group_size: int | None = None, bits: int | None = None
    ) -> BatchQuantizedKVCache:
        """One batch cache from single-row QuantizedKVCache (or KVCache, quantized here) rows,
        left-padded to the longest, like `BatchKVCache.merge`."""
        quantized = [c for c in caches if isinstance(c, QuantizedKVCache)]
        if group_size is None or bits is None:
            if not quantized:
                raise ValueError("merging plain KVCache rows needs group_size and bits")
            group_size, bits = quantized[0].group_size, quantized[0].bits
        rows = []
        for c in caches:
            if isinstance(c, QuantizedKVCache):
                if (c.group_size, c.bits) != (group_size, bits):
                    raise ValueError(
                        f"cannot merge a {c.bits}-bit/group {c.group_size} cache into a "
                        f"{bits}-bit/group {group_size} batch"
                    )
                rows.append((c.keys, c.values, c.offset))
            elif isinstance(c, KVCache):
                if c.keys is None or c.offset == 0:
                    rows.append((None, None, 0))
                else:
                    n = c.offset
                    rows.append(
                        (
                            _quantize(c.keys[..., :n, :], group_size, bits),
                            _quantize(c.values[..., :n, :], group_size, bits),
                            n,
                        )
                    )
            else:
                raise TypeError(f"cannot merge {type(c).__name__} into a quantized batch cache")
        lengths = [n if k is not None else 0 for k, _, n in rows]
        longest = max(lengths)
        padding = [longest - n for n in lengths]
        out = cls(padding, group_size=group_size, bits=bits)
        if longest == 0:
            return out
        k0, v0 = next((k, v) for k, v, n in rows if k is not None and n > 0)
        B = len(rows)

        def blank(like: Quantized) -> list[mx.array]:
            return [mx.zeros((B, p.shape[1], longest, p.shape[3]), dtype=p.dtype) for p in like]

        keys, values = blank(k0), blank(v0)
        for i, ((k, v, n), p) in enumerate(zip(rows, padding)):
            if k is None or n == 0:
                continue
            for j in range(3):
                keys[j][i : i + 1, :, p : p + n] = k[j][..., :n, :]
                values[j][i : i + 1, :, p : p + n] = v[j][..., :n, :]
        out.keys, out.values = tuple(keys), tuple(values)
        out.offset = out.offset + longest
        out.written = longest
        return out

    def extract(self, idx: int) -> QuantizedKVCache:
        """Row `idx` as mlx-lm's single-row QuantizedKVCache (compact copies)."""
        cache = QuantizedKVCache(group_size=self.group_size, bits=self.bits)
        padding = self.left_padding.tolist()[idx]
        if self.keys is not None:
            cache.keys, cache.values = tree_map(
                lambda x: mx.contiguous(x[idx : idx + 1, :, padding : self.written]),
                (self.keys, self.values),
            )
        cache.offset = max(0, self.written - padding)
        return cache

    # -- the forward ---------------------------------------------------------------------------

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[Quantized, Quantized]:
        n = keys.shape[2]
        prev = self.written
        if self.keys is None or prev + n > self.keys[0].shape[2]:
            self._grow(keys, values, n)
        self.offset = self.offset + n
        self.written += n
        qk = _quantize(keys, self.group_size, self.bits)
        qv = _quantize(values, self.group_size, self.bits)
        for i in range(3):
            self.keys[i][..., prev : self.written, :] = qk[i]
            self.values[i][..., prev : self.written, :] = qv[i]
        keys, values = self.keys_and_values()
        row_groups.hand_over(self, keys[0], values[0], self.written)  # offered by their data
        return keys, values

    def _grow(self, keys: mx.array, values: mx.array, n: int) -> None:
        B, heads, _, k_dim = keys.shape
        v_dim = values.shape[3]
        new_steps = (self.step + n - 1) // self.step * self.step
        per_int = 32 // self.bits

        def fresh(dim: int) -> Quantized:
            shape = (B, heads, new_steps)
            return (
                mx.zeros((*shape, dim // per_int), dtype=mx.uint32),
                mx.zeros((*shape, dim // self.group_size), dtype=keys.dtype),
                mx.zeros((*shape, dim // self.group_size), dtype=keys.dtype),
            )

        if self.keys is None:
            self.keys, self.values = fresh(k_dim), fresh(v_dim)
            return
        prev = self.written
        if prev != self.keys[0].shape[2]:
            self.keys, self.values = tree_map(lambda x: x[..., :prev, :], (self.keys, self.values))
        more_k, more_v = fresh(k_dim), fresh(v_dim)
        self.keys = tuple(mx.concatenate([a, b], axis=2) for a, b in zip(self.keys, more_k))
        self.values = tuple(mx.concatenate([a, b], axis=2) for a, b in zip(self.values, more_v))

    def keys_and_values(self) -> tuple[Quantized, Quantized]:
        return tree_map(lambda x: x[..., : self.written, :], (self.keys, self.values))

    def make_mask(self, N: int, return_array: bool = False, **kwargs: Any) -> mx.array:
        return create_causal_mask(N, offset=self.written, left_padding=self.left_padding, **kwargs)

    # -- batched prefill (right padding), as BatchKVCache --------------------------------------

    def prepare(self, *, left_padding=None, lengths=None, right_padding=None) -> None:
        if left_padding is not None:
            if self.keys is not None:
                raise ValueError("left padding can only be added to an empty cache")
            left_padding = mx.array(left_padding)
            self.left_padding = self.left_padding + left_padding
            self.offset = self.offset - left_padding
        if right_padding is not None and max(right_padding) > 0:
            self.right_padding = mx.array(right_padding)

    def finalize(self) -> None:
        if self.right_padding is not None:
            padding = self.right_padding
            self.roll(padding)
            self.offset = self.offset - padding
            self.left_padding = self.left_padding + padding
            self.right_padding = None

    def roll(self, shifts: mx.array) -> None:
        """Roll every row right by shifts[i] ([B] or [B, 1]) along the sequence axis (all three
        parts)."""
        if self.keys is None:
            return
        self.keys, self.values = tree_map(
            lambda x: roll_positions(x, shifts), (self.keys, self.values)
        )

    # -- batch membership ----------------------------------------------------------------------

    def filter(self, batch_indices: Any) -> None:
        """Keep only these rows (in this order); drop left padding every row shares."""
        if self.keys is not None:
            self.keys, self.values = tree_map(lambda x: x[batch_indices], (self.keys, self.values))
        self.offset = self.offset[batch_indices]
        self.left_padding = self.left_padding[batch_indices]
        shared = min(self.left_padding.tolist())
        if shared > 0:
            if self.keys is not None:
                self.keys, self.values = tree_map(
                    lambda x: x[..., shared:, :], (self.keys, self.values)
                )
            self.written -= shared
            self.left_padding = self.left_padding - shared

    def extend(self, other: Any) -> None:
        """Append the rows of another BatchQuantizedKVCache, or of a BatchKVCache (quantized
        here), right-justified at the longer `_idx`, as `BatchKVCache.extend`."""
        if isinstance(other, BatchKVCache):
            other = BatchQuantizedKVCache.from_batch(other, self.group_size, self.bits)
        if not isinstance(other, BatchQuantizedKVCache):
            raise TypeError(f"cannot extend a quantized batch cache with {type(other).__name__}")
        if (other.group_size, other.bits) != (self.group_size, self.bits):
            raise ValueError("cannot extend a quantized batch cache with other kv settings")
        if self.keys is None and other.keys is None:
            self.left_padding = mx.concatenate([self.left_padding, other.left_padding])
            self.offset = mx.concatenate([self.offset, other.offset])
            self.written = max(self.written, other.written)
            return
        like_k = self.keys if self.keys is not None else other.keys
        like_v = self.values if self.values is not None else other.values
        max_idx = max(self.written, other.written)
        max_size = max(c.keys[0].shape[2] for c in (self, other) if c.keys is not None)

        def pad(c: BatchQuantizedKVCache):
            rows = c.offset.shape[0]
            k = c.keys if c.keys is not None else _empty_parts(like_k, rows)
            v = c.values if c.values is not None else _empty_parts(like_v, rows)
            left = max_idx - c.written
            right = max_size - k[0].shape[2] - left
            if right < 0:
                k, v = tree_map(lambda x: x[..., :right, :], (k, v))
                right = 0
            if left or right:
                widths = [(0, 0), (0, 0), (left, right), (0, 0)]
                k, v = tree_map(lambda x: mx.pad(x, widths), (k, v))
            return k, v, c.offset, c.left_padding + left

        (k1, v1, o1, p1), (k2, v2, o2, p2) = pad(self), pad(other)
        self.keys = tuple(mx.concatenate([a, b]) for a, b in zip(k1, k2))
        self.values = tuple(mx.concatenate([a, b]) for a, b in zip(v1, v2))
        self.offset = mx.concatenate([o1, o2])
        self.left_padding = mx.concatenate([p1, p2])
        self.written = max_idx

    # -- the rest of the cache interface -------------------------------------------------------

    @property
    def state(self):
        return self.keys, self.values, self.offset, self.left_padding

    @state.setter
    def state(self, v) -> None:
        self.keys, self.values, self.offset, self.left_padding = v

    @property
    def meta_state(self):
        return tuple(map(str, (self.written, self.group_size, self.bits)))

    @meta_state.setter
    def meta_state(self, v) -> None:
        self.written, self.group_size, self.bits = map(int, v)

    def is_trimmable(self) -> bool:
        return True

    def trim(self, n: int) -> int:
        n = min(self.written, n)
        self.written -= n
        self.offset = self.offset - n
        return n

    def size(self) -> int:
        return self.written

    def empty(self) -> bool:
        return self.keys is None

    @property
    def nbytes(self) -> int:
        if self.keys is None:
            return 0
        return tree_reduce(lambda a, x: a + x.nbytes, (self.keys, self.values), 0)
