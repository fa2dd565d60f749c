"""A batch KV cache whose rows can give back positions without moving any data.

mlx-lm's BatchKVCache keeps rows right-aligned and hides left padding with the mask. After a
verify round each row keeps a different number of the positions it wrote; rolling every row
into alignment moves the whole cache every round (its cost grows with the context). Here a row
instead marks its discarded positions as holes, which join the left padding in the attention mask
(built once per forward, only while holes exist), and RoPE positions come from each row's own `offset`, which counts only
real tokens. Keys are written with their RoPE already applied, so a hole changes nothing for
the positions after it. A round whose kept counts are still on the device
(engine/core/lookahead.py) gives back its positions lazily: `offset` drops on the device, and the
mask hides the round's unkept positions from a device array until `settle` turns them into holes
like any other. When holes take up too much of the buffer, `compact()` gathers each row's real
positions back into place (one move, now and then). Rows far shorter than their neighbours attend
over their own keys, not the longest row's padding (engine/cache/row_groups.py).

On a GPU, a forward over several tokens per row (a verify round) attends over the whole buffer,
its unwritten tail masked, instead of over exactly the positions written so far: MLX's CUDA
backend runs such attention through cuDNN, which builds (tens of milliseconds) and caches one
graph per shape, so a key length that changes every round would build a graph every round. The
buffer's length changes only when it grows, by `step` positions at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
import numpy as np
from mlx_lm.models.cache import BatchKVCache, BatchRotatingKVCache, KVCache

from engine.cache import mlx_lm_private as private
from engine.cache import row_groups
from engine.cache.position_moves import take_positions

DEFAULT_COMPACT_FRACTION = 0.25  # compact when holes exceed this share of the buffer

row_groups.install()  # before any CUDA kernel wraps attention (engine/cache/row_groups.py)


def default_whole_buffer() -> bool:
    """Attend over the whole buffer in multi-token forwards: on a GPU (see above) only; on a
    CPU the masked tail would cost real work and shapes cost nothing."""
    return mx.default_device().type == mx.DeviceType.gpu


class RaggedBatchKVCache(row_groups.PaddingStarts, BatchKVCache):
    """A BatchKVCache whose rows give back positions as holes in the mask (see above)."""

    def __init__(self, left_padding: list[int]) -> None:
        super().__init__(left_padding)
        self.hole_spans: list[tuple[int, int, int]] = []  # (row, start, end) buffer positions
        self.holes = 0  # most hole positions in any row (for the compaction decision)
        self.whole_buffer = default_whole_buffer()
        # rounds given back lazily, oldest first: (first buffer position, width, kept [B])
        self.pending: list[tuple[int, int, mx.array]] = []

    @classmethod
    def from_batch(cls, cache: BatchKVCache) -> RaggedBatchKVCache:
        ragged = cls.__new__(cls)
        ragged.__dict__.update(cache.__dict__)
        ragged.hole_spans = []
        ragged.holes = 0
        ragged.whole_buffer = default_whole_buffer()
        ragged.pending = []
        ragged._starts = None
        return ragged

    def padless(self) -> bool:
        """No row has left padding: every row holds the same positions (read from the device
        once per change of the padding: `starts`)."""
        return not any(self.starts())

    @property
    def written(self) -> int:
        """Positions written into the buffer: left padding, holes and real tokens."""
        return private.write_index(self)

    # -- writing: the buffer grows by whole steps; multi-token forwards may see all of it ------

    def capacity_after(self, n: int) -> int:
        """The buffer's length once `n` more positions are written."""
        if self.keys is not None and self.written + n <= self.keys.shape[2]:
            return self.keys.shape[2]
        return (self.written + n + self.step - 1) // self.step * self.step

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        prev, n = self.written, keys.shape[2]
        capacity = self.capacity_after(n)
        if self.keys is None or capacity != self.keys.shape[2]:
            B, heads, _, k_dim = keys.shape
            grow_k = mx.zeros((B, heads, capacity - prev, k_dim), keys.dtype)
            grow_v = mx.zeros((B, heads, capacity - prev, values.shape[3]), values.dtype)
            if self.keys is None:
                self.keys, self.values = grow_k, grow_v
            else:
                self.keys = mx.concatenate([self.keys[..., :prev, :], grow_k], axis=2)
                self.values = mx.concatenate([self.values[..., :prev, :], grow_v], axis=2)
        self.offset = self.offset + n
        private.set_write_index(self, self.written + n)
        self.keys[..., prev : self.written, :] = keys
        self.values[..., prev : self.written, :] = values
        if self._sees_whole_buffer(n):
            return self.keys, self.values
        keys, values = self.keys[..., : self.written, :], self.values[..., : self.written, :]
        row_groups.hand_over(self, keys, values, self.written)
        return keys, values

    def _sees_whole_buffer(self, n: int) -> bool:
        return self.whole_buffer and n > 1

    # -- the mask: left padding and holes (built once per forward, from layer 0) ---------------

    def valid_map(self, length: int, *, settled_only: bool = False) -> mx.array:
        valid = _padding_map(self.left_padding, length)
        if self.hole_spans:
            holes = np.zeros((self.left_padding.shape[0], length), dtype=bool)
            for row, start, end in self.hole_spans:
                holes[row, start:end] = True
            valid = valid & ~mx.array(holes)
        if not settled_only:
            positions = mx.arange(length)[None]
            for start, width, kept in self.pending:
                unkept = (positions >= start + kept[:, None]) & (positions < start + width)
                valid = valid & ~unkept
        return valid

    def make_mask(self, N: int, return_array: bool = False, window_size=None, **kwargs):
        whole = self._sees_whole_buffer(N)
        if not self.hole_spans and not self.pending and not whole:
            if not return_array and window_size is None and self.padless():
                # rows of equal length need no mask: attention keeps its fused kernels
                return None if N == 1 else "causal"
            return super().make_mask(
                N, return_array=return_array, window_size=window_size, **kwargs
            )
        start = self.written
        length = self.capacity_after(N) if whole else start + N
        rinds = mx.arange(length)
        linds = mx.arange(start, start + N)[:, None]
        causal = linds >= rinds[None]  # [N, length]: hides the unwritten tail too
        keep = mx.concatenate(
            [
                self.valid_map(start),
                mx.ones((self.left_padding.shape[0], length - start), dtype=mx.bool_),
            ],
            axis=1,
        )
        mask = causal[None] & keep[:, None, :]  # [B, N, length]
        if window_size is not None:  # the last `window_size` real positions, holes skipped
            rank = mx.cumsum(keep.astype(mx.int32), axis=1)
            query_rank = rank[:, start : start + N]
            mask = mask & (query_rank[:, :, None] - rank[:, None, :] < window_size)
        return mask[:, None]

    # -- giving positions back -------------------------------------------------------------------

    def give_back_lazily(
        self, width: int, kept: mx.array, *, unkept: mx.array | None = None
    ) -> None:
        """The last `width` written positions were a round whose row i keeps its first
        `kept[i]` (an array not yet read back): the rest leave the row at once on the device.
        `unkept`: `width - kept`, made once for every layer (one op a layer fewer)."""
        self.offset = self.offset - (width - kept if unkept is None else unkept)
        self.pending.append((self.written - width, width, kept))

    def settle(self, kept: list[int], *, holes: RoundHoles | None = None) -> None:
        """The oldest lazily given-back round, its kept counts now read back: its unkept
        positions become holes (later rounds stay in place: compaction leaves the newest
        written positions where they are). `holes`: `round_holes` of that round and `kept`,
        made once for every layer (`settle_layers`)."""
        start, width, _ = self.pending.pop(0)
        if holes is None or holes.round != (start, width):
            holes = round_holes(start, width, kept)
        self.hole_spans.extend(holes.spans)
        self.holes += holes.most
        self._compact_if_holey()

    def correct_rows(self, delta: mx.array, void: mx.array | None) -> None:
        """Rows that kept other counts than the device assumed (a near tie broken on the host,
        engine/core/lookahead.py): their offsets move by `delta` [B], and in the round still
        given back lazily the `void` rows [B] keep nothing (it read a wrong input for them)."""
        self.offset = self.offset + delta
        if void is not None and self.pending:
            start, width, kept = self.pending[-1]
            self.pending[-1] = (start, width, mx.where(void, 0, kept))

    def _compact_if_holey(self) -> None:
        if self.holes > DEFAULT_COMPACT_FRACTION * max(self.written, 1) and self.holes > 16:
            self.compact()

    def rollback(self, surplus: list[int], *, extra_array: mx.array | None = None) -> None:
        """Drop the last surplus[i] written positions of row i. `extra_array`: the rows' surplus
        beyond the least as an array [B], made once for every layer of a model
        (engine/speculative/rollback.py) instead of once per layer from host data."""
        smallest = min(surplus)
        if smallest:
            self.trim(smallest)
            self.hole_spans = [
                (r, a, min(b, self.written)) for r, a, b in self.hole_spans if a < self.written
            ]
        extra = [s - smallest for s in surplus]
        if any(extra):
            for row, e in enumerate(extra):
                if e:
                    self.hole_spans.append((row, self.written - e, self.written))
            self.offset = self.offset - (mx.array(extra) if extra_array is None else extra_array)
            self.holes += max(extra)
        self._compact_if_holey()

    def compact(self) -> None:
        """Move each row's real positions to the right end, holes to the left padding.
        Positions of rounds not settled yet count as real: they are the newest, so they keep
        their places and their pending entries stay right."""
        if self.keys is None or not self.hole_spans:
            self.hole_spans, self.holes = [], 0
            return
        valid = self.valid_map(self.written, settled_only=True)
        real = valid.astype(mx.int32).sum(axis=1)
        # stable order: holes (False) first, then real positions in their order; the unwritten
        # tail stays where it is, so the buffer keeps its length (and attention its shapes)
        order = mx.argsort(
            valid.astype(mx.int32) * (self.written + 1) + mx.arange(self.written)[None]
        )
        capacity = self.keys.shape[2]
        if capacity > self.written:
            tail = mx.arange(self.written, capacity)[None]
            order = mx.concatenate([order, mx.broadcast_to(tail, (order.shape[0], tail.size))], 1)
        self.keys = take_positions(self.keys, order)
        self.values = take_positions(self.values, order)
        self.left_padding = self.written - real
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
        self.keys, self.values, self.offset, self.left_padding, idx = v
        private.set_write_index(self, idx)
        self.hole_spans, self.holes, self.pending = [], 0, []


def _padding_map(left_padding: mx.array, length: int) -> mx.array:
    return mx.arange(length)[None, :] >= left_padding[:, None]


def as_ragged(layers: list) -> list:
    """Batch caches with per-row holes where mlx-lm's plain BatchKVCache is used, and sliding
    windows whose masks match their keys (engine/cache/rotating.py)."""
    from engine.cache.cache_list import map_leaves
    from engine.cache.rotating import OrderedBatchRotatingKVCache

    def convert(c):
        if type(c) is BatchKVCache:
            return RaggedBatchKVCache.from_batch(c)
        if type(c) is BatchRotatingKVCache:
            return OrderedBatchRotatingKVCache.from_batch(c)
        return c

    return map_leaves(layers, convert)


@dataclass(frozen=True)
class RoundHoles:
    """The holes a settled round leaves: its (start, width), each row's unkept span, and the
    most positions a row gave back."""

    round: tuple[int, int]
    spans: tuple[tuple[int, int, int], ...]
    most: int


def round_holes(start: int, width: int, kept: list[int]) -> RoundHoles:
    """The unkept positions of the round written at `start`, `width` wide, whose rows kept
    `kept`: the last `width - kept[i]` of row i."""
    end = start + width
    spans = tuple((row, end - (width - k), end) for row, k in enumerate(kept) if k < width)
    return RoundHoles((start, width), spans, max(width - k for k in kept))


def settle_layers(layers: list, kept: list[int]) -> None:
    """`settle` every layer: the layers wrote the round at the same place, so its holes are
    found once (found per layer, they cost about 2 ms a round at 16 rows and 32 layers on the
    CPU, under the profiler)."""
    holes = None
    for layer in layers:
        start, width, _ = layer.pending[0]
        if holes is None or holes.round != (start, width):
            holes = round_holes(start, width, kept)
        layer.settle(kept, holes=holes)
