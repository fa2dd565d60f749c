"""The prompt cache's RAM tier on real (tiny, random) models: a request continued from a restored
cache produces exactly the greedy tokens of a cold run over its whole prompt.

Disk behaviour (restart, corrupt files, full disk) is in test_prompt_cache_disk.py.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm import load as mlx_load
from mlx_lm.generate import speculative_generate_step
from mlx_lm.models.cache import ArraysCache, KVCache, RotatingKVCache

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine.cache import CacheNamespace, PromptCache
from tests.engine.prompt_cache_support import (
    ATOL,
    N_GEN,
    NS,
    assert_continues_like_cold,
    rand_tokens,
    run,
)
from tests.tiny_models import make_tiny_gemma3_dir, make_tiny_llama_dir, prefill

NS_GEMMA = CacheNamespace(model_id="tiny-gemma3", tokenizer_hash="tok-a")
NS_DRAFT = CacheNamespace(model_id="tiny-llama", tokenizer_hash="tok-a", drafter="tiny-draft")


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return mlx_load(str(make_tiny_llama_dir(tmp_path_factory.mktemp("llama"))))[0]


@pytest.fixture(scope="module")
def draft_llama(tmp_path_factory):
    path = make_tiny_llama_dir(tmp_path_factory.mktemp("draft"), seed=1, hidden_size=32)
    return mlx_load(str(path))[0]


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    path = make_tiny_gemma3_dir(tmp_path_factory.mktemp("gemma"), sliding_window=8)
    return mlx_load(str(path))[0]


def assert_same_run(warm, cold) -> None:
    assert warm[0] == cold[0]
    np.testing.assert_allclose(warm[1], cold[1], atol=ATOL)


def test_extending_request_restores_stored_prefix(llama):
    pc = PromptCache(disk_dir=None)
    stored = rand_tokens(24, seed=1)
    pc.publish(NS, stored, prefill(llama, stored))
    request = stored + rand_tokens(9, seed=2)

    for _ in range(2):  # the second restore must not see what generation did to the first
        match = pc.lookup(NS, request)
        assert match is not None and match.tokens == len(stored) and match.source == "ram"
        assert match.draft is None
        assert_continues_like_cold(llama, match, request)

    s = pc.stats()
    assert (s.hits, s.misses, s.cached_tokens, s.ram_entries) == (2, 0, 2 * len(stored), 1)
    assert s.ram_bytes > 0 and s.disk_entries == 0


def test_edited_message_reuses_common_prefix(llama):
    pc = PromptCache(disk_dir=None)
    stored = rand_tokens(30, seed=3)
    pc.publish(NS, stored, prefill(llama, stored))

    edited = stored[:17] + rand_tokens(11, seed=4)  # the conversation diverges at token 17
    match = pc.lookup(NS, edited)
    assert match is not None and match.tokens == 17
    assert_continues_like_cold(llama, match, edited)

    shorter = stored[:12]  # a request that is itself a prefix of the entry
    match = pc.lookup(NS, shorter)
    assert match is not None and match.tokens == 11
    assert_continues_like_cold(llama, match, shorter)

    # the stored entry is untouched by the trims handed out above
    match = pc.lookup(NS, stored + [500])
    assert match is not None and match.tokens == len(stored)
    assert_continues_like_cold(llama, match, stored + [500])


def test_lookup_always_leaves_one_token_to_run(llama):
    pc = PromptCache(disk_dir=None)
    stored = rand_tokens(16, seed=5)
    pc.publish(NS, stored, prefill(llama, stored))

    match = pc.lookup(NS, stored)  # the very same prompt again
    assert match is not None and match.tokens == len(stored) - 1
    assert_continues_like_cold(llama, match, stored)

    assert pc.lookup(NS, stored[:1]) is None
    assert pc.lookup(NS, []) is None
    assert pc.lookup(NS, rand_tokens(10, seed=6)) is None  # nothing in common
    other = CacheNamespace(model_id="tiny-llama", tokenizer_hash="tok-b")
    assert pc.lookup(other, stored + [7]) is None  # another tokenizer's entries are invisible
    assert pc.stats().misses == 4 and pc.stats().hits == 1


def test_longer_entry_replaces_its_prefix(llama):
    pc = PromptCache(disk_dir=None)
    conv = rand_tokens(40, seed=7)
    pc.publish(NS, conv[:10], prefill(llama, conv[:10]))
    pc.publish(NS, conv[:25], prefill(llama, conv[:25]))
    pc.publish(NS, conv[:25], prefill(llama, conv[:25]))  # the same again: no duplicate
    assert pc.stats().ram_entries == 1

    match = pc.lookup(NS, conv[:10] + [999, 998])  # served by trimming the longer entry
    assert match is not None and match.tokens == 10
    assert_continues_like_cold(llama, match, conv[:10] + [999, 998])

    pc.publish(NS, rand_tokens(12, seed=8), prefill(llama, rand_tokens(12, seed=8)))
    assert pc.stats().ram_entries == 2  # an unrelated conversation is kept


def test_lru_eviction_at_the_ram_byte_cap(llama):
    probe = PromptCache(disk_dir=None)
    convs = [rand_tokens(20, seed=10 + i) for i in range(3)]
    probe.publish(NS, convs[0], prefill(llama, convs[0]))
    one = probe.stats().ram_bytes
    assert one > 0

    pc = PromptCache(disk_dir=None, ram_bytes=int(2.5 * one))
    pc.publish(NS, convs[0], prefill(llama, convs[0]))
    pc.publish(NS, convs[1], prefill(llama, convs[1]))
    assert pc.lookup(NS, convs[0] + [5]) is not None  # conversation 0 is now the most recent
    pc.publish(NS, convs[2], prefill(llama, convs[2]))

    s = pc.stats()
    assert s.ram_entries == 2 and s.ram_bytes <= int(2.5 * one)
    assert pc.lookup(NS, convs[1] + [5]) is None  # the least recently used went
    assert pc.lookup(NS, convs[0] + [5]) is not None
    assert pc.lookup(NS, convs[2] + [5]) is not None

    tiny = PromptCache(disk_dir=None, ram_bytes=one // 2)  # an entry larger than the cap
    tiny.publish(NS, convs[0], prefill(llama, convs[0]))
    assert tiny.stats().ram_entries == 0 and tiny.stats().skipped == {"ram-too-large": 1}


def test_sliding_window_is_exact_or_skipped(gemma):
    """Gemma 3 shaped, window 8: every restore continues exactly like a cold run; a wrapped
    window that would need trimming is skipped with its reason."""
    pc = PromptCache(disk_dir=None)
    short = rand_tokens(6, seed=20)  # below the window: trimmable
    pc.publish(NS_GEMMA, short, prefill(gemma, short))
    request = short[:4] + rand_tokens(14, seed=21)
    match = pc.lookup(NS_GEMMA, request)
    assert match is not None and match.tokens == 4
    assert any(isinstance(c, RotatingKVCache) for c in match.target)
    assert_continues_like_cold(gemma, match, request)

    for one_by_one in (0, 5):  # wrapped by one long forward, or by single decode steps
        long = rand_tokens(21, seed=22 + one_by_one)
        pc.publish(NS_GEMMA, long, prefill(gemma, long, one_by_one=one_by_one))
        request = long + rand_tokens(7, seed=30)
        match = pc.lookup(NS_GEMMA, request)  # the entry is a whole prefix: usable as is
        assert match is not None and match.tokens == len(long)
        assert_continues_like_cold(gemma, match, request)

        before = pc.stats().skipped.get("untrimmable", 0)
        edited = long[:15] + rand_tokens(6, seed=31)  # would need the wrapped window trimmed
        match = pc.lookup(NS_GEMMA, edited)
        if match is not None:
            assert_continues_like_cold(gemma, match, edited)
        assert pc.stats().skipped["untrimmable"] == before + 1

    # a wrapped entry does not replace its (still trimmable) prefixes
    assert pc.lookup(NS_GEMMA, short[:3] + [777, 778]) is not None


def test_rotating_cache_with_sink_tokens(llama):
    """mlx-lm's max_kv_size cache shape: RotatingKVCache(max_size=8, keep=4) on every layer.
    With sink tokens mlx-lm's own results depend on where chunks start (a one-chunk prefill's
    window mask ignores the sinks), so the reference here is the stored cache itself, continued
    without ever leaving memory."""

    def filled(tokens, one_by_one):
        cache = [RotatingKVCache(max_size=8, keep=4) for _ in llama.layers]
        llama(mx.array(tokens[: len(tokens) - one_by_one])[None], cache=cache)
        for t in tokens[len(tokens) - one_by_one :]:
            llama(mx.array([[t]]), cache=cache)
        return cache

    pc = PromptCache(disk_dir=None)
    for one_by_one in (0, 6):
        stored = rand_tokens(19, seed=60 + one_by_one)
        pc.publish(NS, stored, filled(stored, one_by_one))
        request = stored + rand_tokens(5, seed=61)
        match = pc.lookup(NS, request)
        assert match is not None and match.tokens == len(stored)
        assert all(c.keep == 4 and c.max_size == 8 for c in match.target)
        rest = request[len(stored) :]
        assert_same_run(
            run(llama, rest, match.target), run(llama, rest, filled(stored, one_by_one))
        )


def test_draft_caches_travel_with_the_target(llama, draft_llama):
    pc = PromptCache(disk_dir=None)
    stored = rand_tokens(20, seed=40)
    pc.publish(NS_DRAFT, stored, prefill(llama, stored), prefill(draft_llama, stored))
    request = stored + rand_tokens(8, seed=41)

    match = pc.lookup(NS_DRAFT, request)
    assert match is not None and match.tokens == len(stored) and match.draft is not None
    assert len(match.draft) == len(draft_llama.layers)
    assert all(c.offset == len(stored) for c in match.draft)
    # the draft continues like a cold draft run ...
    warm = run(draft_llama, request[len(stored) :], match.draft)
    assert_same_run(warm, run(draft_llama, request))
    # ... and speculative decoding from both restored caches gives the target's greedy tokens
    match = pc.lookup(NS_DRAFT, request)
    steps = list(
        speculative_generate_step(
            mx.array(request[len(stored) :]),
            llama,
            draft_llama,
            prompt_cache=match.target + match.draft,
            num_draft_tokens=3,
            max_tokens=N_GEN,
        )
    )
    warm = [int(t) for t, _, _ in steps], np.stack([np.array(lp) for _, lp, _ in steps])
    assert_same_run(warm, run(llama, request))


def test_draft_cache_of_another_length(llama, draft_llama):
    pc = PromptCache(disk_dir=None)
    tokens = rand_tokens(12, seed=42)
    pc.publish(NS_DRAFT, tokens, prefill(llama, tokens), prefill(draft_llama, tokens + [9]))
    match = pc.lookup(NS_DRAFT, tokens + [3])  # one token longer: trimmed to the target's
    assert match is not None and [c.offset for c in match.draft] == [12, 12]

    pc.publish(NS_DRAFT, tokens, prefill(llama, tokens), prefill(draft_llama, tokens[:-1]))
    match = pc.lookup(NS_DRAFT, tokens + [3])  # one token short: left out
    assert match is not None and match.draft is None
    assert pc.stats().skipped["draft-mismatch"] == 1


def test_recurrent_state_serves_only_prompts_it_is_a_whole_prefix_of(llama):
    pc = PromptCache(disk_dir=None)
    arrays = ArraysCache(1)
    arrays[0] = mx.arange(4, dtype=mx.float32).reshape(1, 4)
    pc.publish(NS, [1, 2, 3], [arrays])
    assert pc.stats().ram_entries == 1
    match = pc.lookup(NS, [1, 2, 3, 4])  # a whole prefix: restored as it was
    assert match is not None and match.tokens == 3
    assert match.target[0][0].tolist() == [[0.0, 1.0, 2.0, 3.0]]
    assert pc.lookup(NS, [1, 2, 9, 4]) is None  # would need trimming: never
    assert pc.stats().skipped["untrimmable"] == 1  # counted as an untrimmable entry
    unsupported = ArraysCache(1)  # state of an unknown length (never fed)
    pc.publish(NS, [5, 6], [unsupported])
    assert pc.stats().skipped == {"untrimmable": 1, "empty-cache": 1}


def test_unsupported_and_mismatched_caches(llama):
    pc = PromptCache(disk_dir=None)

    tokens = rand_tokens(8, seed=50)
    with pytest.raises(ValueError):
        pc.publish(NS, tokens + [1], prefill(llama, tokens))  # the caches hold 8, not 9
    pc.publish(NS, [], [KVCache()])  # nothing to store
    assert pc.stats().ram_entries == 0
