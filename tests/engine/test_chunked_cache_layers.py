"""llama4's chunked-attention cache (mlx-lm's ChunkedKVCache) as a prompt-cache layer: stored,
checked and restored to the very state it was, trimmable only while it holds every position,
and refused by a model whose chunks are of another size; token ids kept as state are stored (in
RAM and on disk)."""

import mlx.core as mx
import pytest
from mlx_lm.models.cache import ChunkedKVCache

from engine.cache.layers import (
    CHUNKED,
    LayerInfo,
    check_info,
    from_numpy,
    numpy_views,
    snapshot,
    to_cache,
    trim_state,
)
from engine.cache.layout import LayerLayout, _layer_mismatch

HEADS, DIM, CHUNK = 2, 4, 4


def fed(tokens: int, *, step: int = 1) -> ChunkedKVCache:
    """A cache fed as llama4 feeds it: the front trimmed before every forward."""
    cache = ChunkedKVCache(CHUNK)
    for first in range(0, tokens, step):
        n = min(step, tokens - first)
        cache.maybe_trim_front()
        pos = mx.arange(first, first + n, dtype=mx.float32)
        kv = mx.broadcast_to(pos[None, None, :, None], (1, HEADS, n, DIM))
        cache.update_and_fetch(kv, kv + 100)
    return cache


def same(a: ChunkedKVCache, b: ChunkedKVCache) -> bool:
    (ka, va), (kb, vb) = a.keys_and_values(), b.keys_and_values()
    return (a.offset, a.start_position) == (b.offset, b.start_position) and bool(
        mx.array_equal(ka, kb) and mx.array_equal(va, vb)
    )


def test_a_short_cache_round_trips_and_trims():
    cache = fed(3)
    state = snapshot(cache)
    assert state.kind == CHUNKED and state.trimmable
    assert state.meta == {"offset": 3, "chunk_size": CHUNK, "start": 0}
    assert same(to_cache(state), cache)
    assert same(to_cache(trim_state(state, 2)), fed(2))


def test_a_cache_that_dropped_its_front_restores_exactly_and_continues_alike():
    cache = fed(10, step=3)
    assert cache.start_position > 0
    state = snapshot(cache)
    assert not state.trimmable
    with pytest.raises(ValueError):
        trim_state(state, 9)
    restored = to_cache(state)
    assert same(restored, cache)
    for c in (cache, restored):
        c.maybe_trim_front()
        c.update_and_fetch(mx.ones((1, HEADS, 1, DIM)), mx.ones((1, HEADS, 1, DIM)))
    assert same(restored, cache)


def test_disk_form_is_checked_and_read_back():
    state = snapshot(fed(10, step=3))
    mx.eval(state.arrays)
    info = state.info()
    check_info(info, 10)
    views, _ = numpy_views(state)
    assert same(to_cache(from_numpy(info, views)), to_cache(state))
    bad = LayerInfo(CHUNKED, dict(info.meta, start=info.meta["start"] + 1), info.arrays)
    with pytest.raises(ValueError):
        check_info(bad, 10)


def test_a_model_with_other_chunks_refuses_the_entry():
    info = snapshot(fed(3)).info()
    want = LayerLayout(CHUNKED, HEADS, DIM, DIM, "float32", chunk_size=CHUNK)
    assert _layer_mismatch(info, want, None, 64) is None
    other = LayerLayout(CHUNKED, HEADS, DIM, DIM, "float32", chunk_size=CHUNK * 2)
    assert "chunks of 4" in _layer_mismatch(info, other, None, 64)


def test_token_ids_kept_as_state_are_stored(tmp_path):
    """longcat_flash_ngram keeps its last tokens (int64) in an ArraysCache: in RAM and on disk."""
    from mlx_lm.models.cache import ArraysCache

    from engine.cache import CacheNamespace, PromptCache

    cache = ArraysCache(1)
    cache[0] = mx.array([[5, 6, 7]], dtype=mx.int64)
    state = snapshot(cache, tokens=9)
    mx.eval(state.arrays)
    check_info(state.info(), 9)
    views, _ = numpy_views(state)
    back = to_cache(from_numpy(state.info(), views))
    assert back[0].dtype == mx.int64 and back[0].tolist() == [[5, 6, 7]]

    ns, tokens = CacheNamespace(model_id="ngram", tokenizer_hash="t"), list(range(40, 49))
    pc = PromptCache(disk_dir=tmp_path)
    pc.publish(ns, tokens, [cache])
    pc.close()
    pc = PromptCache(disk_dir=tmp_path)
    match = pc.lookup(ns, tokens + [1])
    assert pc.stats().skipped == {}
    pc.close()
    assert match is not None and match.source == "disk"
    assert match.target[0][0].dtype == mx.int64 and match.target[0][0].tolist() == [[5, 6, 7]]
