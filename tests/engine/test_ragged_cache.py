"""RaggedBatchKVCache: per-row rollback as holes, compaction, and the whole-buffer view that
multi-token forwards use on a GPU (engine/cache/ragged.py)."""

from __future__ import annotations

import mlx.core as mx

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine.cache.ragged import RaggedBatchKVCache, settle_layers


def write(cache: RaggedBatchKVCache, start: int, n: int, rows: int = 2):
    """Write n positions whose key values are their write order (start, start+1, ...)."""
    values = mx.arange(start, start + n, dtype=mx.float32)
    kv = mx.broadcast_to(values[None, None, :, None], (rows, 1, n, 4))
    return cache.update_and_fetch(kv, kv)


def real_positions(cache: RaggedBatchKVCache) -> list[list[float]]:
    valid = cache.valid_map(cache._idx).tolist()
    keys = cache.keys[:, 0, : cache._idx, 0].tolist()
    return [[k for k, ok in zip(row, v) if ok] for row, v in zip(keys, valid)]


def test_rollback_leaves_holes_and_compaction_keeps_the_buffer_length():
    cache = RaggedBatchKVCache([0, 0])
    cache.whole_buffer = False
    write(cache, 0, 3)
    write(cache, 3, 5)  # a verify round of 5 positions
    cache.rollback([1, 4])  # row 0 keeps 4 of them, row 1 keeps 1
    assert real_positions(cache) == [[0, 1, 2, 3, 4, 5, 6], [0, 1, 2, 3]]
    assert cache.offset.tolist() == [7, 4]
    capacity = cache.keys.shape[2]
    cache.compact()
    assert cache.keys.shape[2] == capacity
    assert cache.hole_spans == []
    assert real_positions(cache) == [[0, 1, 2, 3, 4, 5, 6], [0, 1, 2, 3]]
    write(cache, 7, 1)  # writes continue after the compacted rows
    assert real_positions(cache) == [[0, 1, 2, 3, 4, 5, 6, 7], [0, 1, 2, 3, 7]]


def test_whole_buffer_view_and_mask_cover_the_same_length():
    cache = RaggedBatchKVCache([1, 0])
    cache.whole_buffer = True
    write(cache, 0, 3)
    cache.rollback([0, 1])
    mask = cache.make_mask(4)
    keys, _ = write(cache, 3, 4)
    assert keys.shape[2] == cache.keys.shape[2] == mask.shape[-1] == cache.step
    m = mask.tolist()
    # row 0: left padding at 0, then 1..2 and the new 3..6; nothing of the unwritten tail
    assert [i for i, ok in enumerate(m[0][0][3]) if ok] == [1, 2, 3, 4, 5, 6]
    # row 1: its rolled-back position 2 is a hole
    assert [i for i, ok in enumerate(m[1][0][0]) if ok] == [0, 1, 3]
    one, _ = write(cache, 7, 1)  # one-token steps keep the exact view
    assert one.shape[2] == cache._idx == 8


def test_window_counts_real_positions_not_holes():
    cache = RaggedBatchKVCache([0, 0])
    cache.whole_buffer = False
    write(cache, 0, 6)
    cache.rollback([0, 3])  # row 1 keeps positions 0..2; 3..5 become holes
    mask = cache.make_mask(1, window_size=3).tolist()
    # the query at buffer position 6 sees itself and the 2 real positions before it
    assert [i for i, ok in enumerate(mask[0][0][0]) if ok] == [4, 5, 6]
    assert [i for i, ok in enumerate(mask[1][0][0]) if ok] == [1, 2, 6]


def test_rows_of_equal_length_attend_without_a_mask():
    """No padding and no holes: None for a decode step and "causal" for several tokens, so
    attention keeps its fused kernels; padding, holes or a window bring the mask back."""
    cache = RaggedBatchKVCache([0, 0])
    cache.whole_buffer = False
    write(cache, 0, 3)
    assert cache.make_mask(1) is None
    assert cache.make_mask(4) == "causal"
    assert isinstance(cache.make_mask(1, window_size=2), mx.array)
    assert isinstance(cache.make_mask(1, return_array=True), mx.array)
    cache.rollback([0, 1])  # a hole in row 1
    assert isinstance(cache.make_mask(1), mx.array)
    padded = RaggedBatchKVCache([2, 0])
    padded.whole_buffer = False
    write(padded, 0, 3)
    mask = padded.make_mask(1)
    assert mask.shape[-1] == 4 and not mask[0].flatten()[0].item()
    padded.left_padding = mx.array([0, 0])  # the padding is read again once it changes
    assert padded.make_mask(1) is None


def test_positions_given_back_lazily_are_hidden_before_they_are_read_back():
    """A round queued ahead (engine/core/lookahead.py): its kept counts stay on the device,
    yet the offsets and the mask already leave out what it did not keep; reading them back
    turns that into the same holes a rollback makes, and the next round's pending positions
    stay where they are when the cache compacts."""
    lazy, eager = RaggedBatchKVCache([0, 0]), RaggedBatchKVCache([0, 0])
    for cache in (lazy, eager):
        cache.whole_buffer = False
        write(cache, 0, 3)
        write(cache, 3, 5)
    eager.rollback([1, 4])
    lazy.give_back_lazily(5, mx.array([4, 1]))  # not read back: a device array
    assert lazy.offset.tolist() == eager.offset.tolist() == [7, 4]
    assert real_positions(lazy) == real_positions(eager) == [[0, 1, 2, 3, 4, 5, 6], [0, 1, 2, 3]]
    mask = lazy.make_mask(2).tolist()
    assert [i for i, ok in enumerate(mask[1][0][1]) if ok] == [0, 1, 2, 3, 8, 9]
    write(lazy, 8, 3)  # the next round, queued before the first is read back
    lazy.give_back_lazily(3, mx.array([3, 2]))
    lazy.settle([4, 1])
    assert len(lazy.pending) == 1 and lazy.hole_spans
    lazy.compact()
    assert real_positions(lazy) == [[0, 1, 2, 3, 4, 5, 6, 8, 9, 10], [0, 1, 2, 3, 8, 9]]
    lazy.settle([3, 2])
    assert real_positions(lazy) == [[0, 1, 2, 3, 4, 5, 6, 8, 9, 10], [0, 1, 2, 3, 8, 9]]
    assert lazy.offset.tolist() == [10, 6] and lazy.pending == []


def test_layers_settled_together_get_the_holes_each_would_alone():
    """`settle_layers` finds a round's holes once for every layer that wrote it; each layer
    ends as its own `settle` leaves it, a layer at another place (a round of another width)
    included, and a round whose every row kept all leaves no hole."""

    def layer(width: int) -> RaggedBatchKVCache:
        cache = RaggedBatchKVCache([0, 0, 1])
        cache.whole_buffer = False
        write(cache, 0, 3, rows=3)
        write(cache, 3, width, rows=3)
        cache.give_back_lazily(width, mx.array([4, 1, 2]))
        return cache

    together = [layer(5), layer(5), layer(6)]
    alone = [layer(5), layer(5), layer(6)]
    settle_layers(together, [4, 1, 2])
    for cache in alone:
        cache.settle([4, 1, 2])
    for a, b in zip(together, alone):
        assert (a.hole_spans, a.holes, a.pending) == (b.hole_spans, b.holes, b.pending)
        assert real_positions(a) == real_positions(b)
    assert together[0].hole_spans == [(0, 7, 8), (1, 4, 8), (2, 5, 8)]
    assert together[2].hole_spans == [(0, 7, 9), (1, 4, 9), (2, 5, 9)]
    whole = layer(5)
    settle_layers([whole], [5, 5, 5])
    assert whole.hole_spans == [] and whole.holes == 0


def _kept(rows: list, marks: list) -> list:
    """Per row and head, the positions whose mark is set."""
    return [
        [[x for x, ok in zip(head, marks[b]) if ok] for head in row] for b, row in enumerate(rows)
    ]


def test_compaction_moves_every_head_and_both_value_sizes_alike():
    """Compaction gathers each row's real positions for every head, keys and values of
    different sizes alike: what each head attends to is unchanged."""
    cache = RaggedBatchKVCache([1, 0])
    cache.whole_buffer = False
    keys = mx.random.normal((2, 3, 7, 4), key=mx.random.key(1))
    values = mx.random.normal((2, 3, 7, 6), key=mx.random.key(2))
    cache.update_and_fetch(keys, values)
    cache.rollback([1, 3])  # both drop the last position; row 1 leaves two more as holes
    valid = cache.valid_map(cache.written).tolist()
    before_k = _kept(cache.keys[:, :, : cache.written].tolist(), valid)
    before_v = _kept(cache.values[:, :, : cache.written].tolist(), valid)
    cache.compact()
    assert cache.hole_spans == [] and cache.left_padding.tolist() == [1, 2]
    settled = cache.valid_map(cache.written).tolist()  # left padding only, after compaction
    assert _kept(cache.keys[:, :, : cache.written].tolist(), settled) == before_k
    assert _kept(cache.values[:, :, : cache.written].tolist(), settled) == before_v
