"""Decode attention split by groups of rows, each over its own rows' keys: the plan, the split
against one call over the padded batch, and whole requests of very different lengths through
the engine, every row equal to mlx_lm.generate alone."""

from __future__ import annotations

import asyncio
import weakref

import mlx.core as mx
import pytest

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine.cache import row_groups
from engine.cache.ragged import RaggedBatchKVCache
from engine.cache.row_groups import Group, plan
from engine.requests import SpecMethod, SpeculativeParams
from tests.engine.test_exactness import make_prompts, reference_tokens, run_engine
from tests.tiny_models import make_tiny_llama_dir


@pytest.fixture
def split_calls(monkeypatch):
    """Row groups on (as on the CPU), and a count of the attention calls that split."""
    row_groups.set_enabled(True)
    counts = {"split": 0}
    original = row_groups._taken

    def taken(k, v):
        groups = original(k, v)
        counts["split"] += groups is not None
        return groups

    monkeypatch.setattr(row_groups, "_taken", taken)
    yield counts
    row_groups.set_enabled(None)


def test_short_rows_beside_a_long_one_get_their_own_window():
    assert plan([1748, 1748, 1748, 0], 2048) == (Group(0, 3, 1748), Group(3, 4, 0))
    assert plan([1748, 0, 1748, 1748], 2048) == (
        Group(0, 1, 1748),
        Group(1, 2, 0),
        Group(2, 4, 1748),
    )
    # rows of about one length share a group: a group costs calls, a few positions do not
    assert plan([1700, 1710, 0], 2048) == (Group(0, 2, 1700), Group(2, 3, 0))


def test_no_plan_where_it_saves_too_little():
    assert plan([0, 0, 0, 0], 2048) is None  # rows of one length
    assert plan([10, 0, 5, 3], 2048) is None  # a few positions of padding
    assert plan([500] * 4, 2048) is None  # under a quarter of the padded keys
    assert plan([300, 0], 600, min_saved=1024) is None  # too few positions in all
    assert plan([300, 0], 600, min_saved=256) == (Group(0, 1, 300), Group(1, 2, 0))


def test_groups_cover_every_row_in_order_within_the_limit():
    starts = [1900, 0, 1800, 10, 1950, 0, 1700, 5]
    groups = plan(starts, 2048, max_groups=3, group_cost=0, min_saved=1, min_saved_share=0)
    assert groups is not None and len(groups) <= 3
    assert [g.lo for g in groups] == [0] + [g.hi for g in groups[:-1]]
    assert groups[-1].hi == len(starts)
    assert all(g.start == min(starts[g.lo : g.hi]) for g in groups)


def _padded_batch(lengths: list[int], *, heads=4, kv_heads=2, dim=16, seed=0):
    """q, k, v, and the left-padding mask of rows of `lengths`, right-aligned (fp32)."""
    mx.random.seed(seed)
    B, L = len(lengths), max(lengths)
    q = mx.random.normal((B, heads, 1, dim))
    k = mx.random.normal((B, kv_heads, L, dim))
    v = mx.random.normal((B, kv_heads, L, dim))
    starts = mx.array([L - n for n in lengths])
    mask = (mx.arange(L)[None] >= starts[:, None])[:, None, None, :]
    return q, k, v, mask, [L - n for n in lengths]


def _mlx_sdpa():
    fn = mx.fast.scaled_dot_product_attention
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    return fn


def test_a_split_call_equals_one_call_over_the_padded_batch():
    q, k, v, mask, starts = _padded_batch([40, 40, 300, 35, 300])
    groups = plan(starts, 300, min_saved=1, min_saved_share=0, group_cost=0)
    assert groups is not None and len(groups) == 4
    original = _mlx_sdpa()
    whole = original(q, k, v, scale=0.25, mask=mask)
    row_groups.offer(k, v, groups)
    parts = row_groups.make_sdpa(original)(q, k, v, scale=0.25, mask=mask)
    assert mx.allclose(parts, whole, atol=1e-6, rtol=1e-5).item()
    # each group as a batch of its own rows over exactly their keys: the same numbers
    for g in groups:
        keys, values = k[g.lo : g.hi, :, g.start :], v[g.lo : g.hi, :, g.start :]
        alone = original(
            q[g.lo : g.hi], keys, values, scale=0.25, mask=mask[g.lo : g.hi, ..., g.start :]
        )
        assert mx.array_equal(parts[g.lo : g.hi], alone).item()


@pytest.mark.parametrize("mask", ["causal", None, "broadcast", "other length"])
def test_without_a_mask_per_row_nothing_splits(mask):
    q, k, v, _, starts = _padded_batch([40, 300])
    if mask == "broadcast":
        mask = mx.ones((1, 1, 1, 300), dtype=mx.bool_)
    elif mask == "other length":  # a mask not made for these keys: its columns would not line up
        mask = mx.ones((2, 1, 1, 299), dtype=mx.bool_)
    calls = []
    split = row_groups.make_sdpa(lambda q, k, v, **kw: calls.append(q.shape[0]) or q)
    row_groups.offer(k, v, plan(starts, 300, min_saved=1, min_saved_share=0))
    split(q, k, v, scale=1.0, mask=mask)
    assert calls == [2]  # one call over the whole batch


def test_only_the_offered_arrays_split():
    q, k, v, mask, starts = _padded_batch([40, 300])
    calls = []
    split = row_groups.make_sdpa(lambda q, k, v, **kw: calls.append(q.shape[0]) or q)
    row_groups.offer(k, v, plan(starts, 300, min_saved=1, min_saved_share=0))
    split(q, k + 0, v, scale=1.0, mask=mask)  # other keys: one call
    assert calls == [2]
    split(q, k, v, scale=1.0, mask=mask)  # its own arrays: a call per group
    assert calls == [2, 1, 1]
    split(q, k, v, scale=1.0, mask=mask)  # an offer serves one call
    assert calls == [2, 1, 1, 2]


def test_the_ragged_cache_offers_the_forwards_of_padded_rows(split_calls, monkeypatch):
    offers = []
    monkeypatch.setattr(row_groups, "offer", lambda k, v, groups: offers.append(groups))
    monkeypatch.setattr(row_groups, "DEFAULT_MIN_SAVED", 1)
    monkeypatch.setattr(row_groups, "DEFAULT_GROUP_COST", 1)
    cache = RaggedBatchKVCache([0, 200])
    kv = mx.zeros((2, 2, 300, 8))
    cache.update_and_fetch(kv, kv)  # a prompt prefilled side by side
    one = mx.zeros((2, 2, 1, 8))
    cache.update_and_fetch(one, one)  # a decode step
    assert offers == [(Group(0, 1, 0), Group(1, 2, 200))] * 2
    cache.whole_buffer = True  # a GPU's verify round over the whole buffer: shapes stay put
    cache.update_and_fetch(kv[:, :, :5], kv[:, :, :5])
    row_groups.set_enabled(False)
    cache.update_and_fetch(one, one)
    assert len(offers) == 2
    row_groups.set_enabled(True)
    even = RaggedBatchKVCache([0, 0])  # rows of one length: nothing to split
    even.update_and_fetch(kv, kv)
    even.update_and_fetch(one, one)
    assert len(offers) == 2


def test_a_forward_without_a_plan_withdraws_the_last_offer(split_calls):
    cache = RaggedBatchKVCache([0, 0])
    kv = mx.zeros((2, 2, 8, 8))
    row_groups.offer(kv, kv, (Group(0, 2, 0),))
    cache.update_and_fetch(kv, kv)
    assert row_groups._state["offer"] is None


def test_an_offer_keeps_no_arrays_alive():
    kv = mx.zeros((2, 2, 8, 8))
    gone = weakref.ref(kv)
    row_groups.offer(kv, kv, (Group(0, 2, 0),))
    del kv
    assert gone() is None
    assert row_groups._taken(mx.zeros((2, 2, 8, 8)), mx.zeros((2, 2, 8, 8))) is None


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    return make_tiny_llama_dir(tmp_path_factory.mktemp("tiny_llama_groups"))


def test_rows_of_very_different_lengths_equal_generate(tiny_llama, split_calls):
    short = make_prompts(3, vocab=49152, seed=41, min_len=5, max_len=30)
    long = make_prompts(1, vocab=49152, seed=42, min_len=600, max_len=600)
    prompts = [short[0], long[0], short[1], short[2]]
    expected = reference_tokens(tiny_llama, prompts, max_tokens=20)
    got = asyncio.run(run_engine(tiny_llama, prompts, 20, stagger=False, prefill_chunk=1024))
    assert got == expected
    assert split_calls["split"] > 0  # the short rows attended over their own keys


def test_speculating_rows_of_very_different_lengths_equal_generate(tiny_llama, split_calls):
    short = make_prompts(3, vocab=49152, seed=43, min_len=5, max_len=30)
    long = make_prompts(1, vocab=49152, seed=44, min_len=700, max_len=700)
    prompts = [long[0], *short]
    expected = reference_tokens(tiny_llama, prompts, max_tokens=24)
    specs = [
        SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=3, ngram_max=3),
        SpeculativeParams(),
        SpeculativeParams(method=SpecMethod.AUTO, draft_tokens=4),
        SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=2, ngram_max=2),
    ]
    got = asyncio.run(
        run_engine(tiny_llama, prompts, 24, stagger=True, prefill_chunk=1024, specs=specs)
    )
    assert got == expected
    assert split_calls["split"] > 0


def test_a_split_call_over_quantized_keys_equals_one_call():
    from mlx_lm.models import base

    q, k, v, mask, starts = _padded_batch([40, 300, 35], dim=64)
    qk = tuple(mx.quantize(k, group_size=64, bits=8))
    qv = tuple(mx.quantize(v, group_size=64, bits=8))
    original = base.quantized_scaled_dot_product_attention
    while hasattr(original, "__wrapped__"):
        original = original.__wrapped__
    # mlx-lm scales the queries in place: each call gets its own
    whole = original(q * 1, qk, qv, scale=0.125, mask=mask, group_size=64, bits=8)
    groups = plan(starts, 300, min_saved=1, min_saved_share=0, group_cost=0)
    row_groups.offer(qk[0], qv[0], groups)
    split = row_groups.make_quantized_sdpa(original)
    parts = split(q * 1, qk, qv, scale=0.125, mask=mask, group_size=64, bits=8)
    assert len(groups) == 3 and mx.allclose(parts, whole, atol=1e-5, rtol=1e-4).item()
