"""A row that decodes alone without speculating runs on its own plain KVCache, as
mlx_lm.generate does (engine/core/batch.py, `solo`). It moves into a batch cache when another row
joins or when it drafts, and back when the others leave; every reply stays exactly
mlx_lm.generate's at temperature 0, through every move."""

from __future__ import annotations

import pytest
from mlx_lm.models.cache import KVCache

from engine.requests import SpecMethod, SpeculativeParams
from tests.engine.engine_harness import P_A, P_B, P_C, Driver, make_core, synthetic

pytestmark = pytest.mark.timeout(120)

N = 24
LOOKUP = SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=3)


def test_a_single_plain_row_decodes_on_a_plain_cache(tiny):
    drive = Driver(make_core(tiny))
    rid = drive.add(P_A)
    drive.until(lambda: len(drive.batch) == 1 and len(drive.tokens[rid]) > 2)
    assert drive.batch.solo
    assert all(type(layer) is KVCache for layer in drive.batch.cache)
    drive.finish()
    assert drive.tokens[rid] == tiny.greedy(P_A, N)
    assert not drive.batch.solo and drive.batch.cache is None  # nothing left behind


@pytest.mark.parametrize("second", ["plain", "lookup", "synthetic"])
def test_a_row_joining_moves_the_lone_row_into_the_batch_and_back(tiny, second):
    drive = Driver(make_core(tiny))
    first = drive.add(P_A, max_tokens=60)
    drive.until(lambda: len(drive.tokens[first]) >= 5)
    assert drive.batch.solo
    spec = {
        "plain": SpeculativeParams(),
        "lookup": LOOKUP,
        "synthetic": synthetic(P_B, tiny.greedy(P_B, 12), 0.7, 3),
    }[second]
    other = drive.add(P_B, max_tokens=12, speculative=spec)
    drive.until(lambda: len(drive.batch) == 2)
    assert not drive.batch.solo
    drive.until(lambda: len(drive.batch) == 1)
    assert drive.batch.solo  # the first row alone again, on its own cache
    drive.finish()
    assert drive.tokens[other] == tiny.greedy(P_B, 12)
    assert drive.tokens[first] == tiny.greedy(P_A, 60)
    assert (2, False) in drive.modes and drive.modes.count((1, True)) > 5


def test_a_lone_row_that_speculates_uses_the_batch_cache(tiny):
    drive = Driver(make_core(tiny))
    rid = drive.add(P_C, speculative=LOOKUP)
    drive.finish()
    assert drive.tokens[rid] == tiny.greedy(P_C, N)
    assert not any(solo for _, solo in drive.modes)


def test_the_plain_row_left_alone_beside_a_leaving_speculating_row(tiny):
    """Rows that leave in any order: each time one plain row is left, it goes solo; exact."""
    drive = Driver(make_core(tiny))
    a = drive.add(P_A, max_tokens=40)
    b = drive.add(P_B, max_tokens=10, speculative=synthetic(P_B, tiny.greedy(P_B, 10), 0.9, 4))
    c = drive.add(P_C, max_tokens=20, speculative=LOOKUP)
    drive.finish()
    assert drive.tokens[a] == tiny.greedy(P_A, 40)
    assert drive.tokens[b] == tiny.greedy(P_B, 10)
    assert drive.tokens[c] == tiny.greedy(P_C, 20)
    assert (1, True) in drive.modes


def test_kv_quantization_keeps_the_batch_cache(tiny):
    """Its conversions work on batch caches (a start past this reply: nothing converts)."""
    drive = Driver(make_core(tiny, kv_bits=8, kv_start=10_000))
    rid = drive.add(P_A)
    drive.finish()
    assert len(drive.tokens[rid]) == N
    assert not any(solo for _, solo in drive.modes)


def test_a_solo_row_on_a_cached_prompt_leaves_the_stored_entry_intact(tiny):
    """The row decodes on the caches the prompt cache handed out, and stores its own at the
    end: a third run of the same prompt, served from the cache again, is still exact."""
    from engine.cache.prompt_cache import PromptCache
    from engine.cache.reuse import PromptReuse

    core = make_core(tiny)
    core.executor.reuse = PromptReuse(PromptCache(disk_bytes=0), core.target)
    for _ in range(3):
        drive = Driver(core)
        rid = drive.add(P_B, max_tokens=16)
        drive.finish()
        assert drive.tokens[rid] == tiny.greedy(P_B, 16)
        assert (1, True) in drive.modes
    assert core.executor.reuse.cache.stats().hits >= 2
