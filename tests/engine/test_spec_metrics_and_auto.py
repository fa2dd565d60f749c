"""Speculation figures as users read them (tokens per forward exactly 1.00 without speculation,
forwards saved never decreasing, recent totals) and the auto policy's choices and cost model."""

from __future__ import annotations

import asyncio

import pytest

from engine.core.request_state import RequestState
from engine.requests import GenerationRequest, SpecMethod, SpecStats, SpeculativeParams
from engine.sampling import RowSampler
from engine.speculative.auto import (
    DEFAULT_FEW_WIDTHS,
    DEFAULT_PROBE_EVERY,
    DEFAULT_WINDOW,
    AutoPolicy,
    CostModel,
    RowAcceptance,
    expected_tokens,
)
from engine.speculative.metrics import (
    RecentAcceptance,
    RecentTotals,
    record_forward,
    record_round,
)
from engine.speculative.policy import SpeculationPolicy, draft_drafter_name
from tests.engine.engine_harness import P_A, P_B, P_C, collect, synthetic, with_engine

# -- figures through the engine ----------------------------------------------------------------


def test_tokens_per_forward_is_exactly_one_without_speculation(tiny):
    async def body(eng):
        replies = await asyncio.gather(
            *(
                collect(eng, GenerationRequest(prompt_tokens=p, max_tokens=n))
                for p, n in ((P_A, 9), (P_B, 17), (P_C, 30))
            )
        )
        return replies, eng.stats()

    replies, stats = with_engine(tiny.path, body)
    for reply in replies:
        spec = reply.finished.stats.spec
        assert spec.tokens_per_forward == 1.0, spec
        assert spec.forwards_saved == 0
    assert stats.spec.tokens_per_forward == 1.0


def test_forwards_saved_never_decreases_while_a_reply_runs(tiny):
    reference = tiny.greedy(P_B, 40)

    async def body(eng):
        seen = []
        request = GenerationRequest(
            prompt_tokens=P_B, max_tokens=40, speculative=synthetic(P_B, reference, 0.8, 4)
        )
        async for event in eng.submit(request):
            stats = getattr(event, "stats", None)
            if stats is not None:
                seen.append(stats.spec.forwards_saved)
        return seen, eng.stats()

    seen, engine_stats = with_engine(tiny.path, body, stats_interval_s=0.0)
    assert len(seen) > 3 and seen[-1] > 0
    assert seen == sorted(seen)
    assert engine_stats.spec.forwards_saved == seen[-1]
    assert engine_stats.spec_recent.forwards_saved == seen[-1]  # all inside the last minute
    # every round is counted by who drafted it, in the reply and in the engine's totals
    assert engine_stats.spec.rounds_by_drafter == {"synthetic": engine_stats.spec.rounds}
    assert engine_stats.spec_recent.rounds_by_drafter == engine_stats.spec.rounds_by_drafter


def test_rounds_are_counted_by_drafter_and_totals_add_and_subtract_them():
    spec = SpecStats()
    record_round(spec, [1, 2], 1, draft_s=0, verify_s=0, sample_s=0, drafter="lookup")
    record_round(spec, [1], 0, draft_s=0, verify_s=0, sample_s=0, drafter="head")
    record_round(spec, [1], 1, draft_s=0, verify_s=0, sample_s=0, drafter="lookup")
    record_round(spec, [], 0, draft_s=0, verify_s=0, sample_s=0, drafter="lookup")  # no draft
    assert spec.rounds == 3 and spec.rounds_by_drafter == {"lookup": 2, "head": 1}
    totals = SpecStats()
    totals.add(spec)
    totals.add(spec)
    assert totals.rounds_by_drafter == {"lookup": 4, "head": 2}
    earlier = SpecStats(rounds_by_drafter={"lookup": 4})
    assert totals.minus(earlier).rounds_by_drafter == {"head": 2}


def test_record_forward_and_recent_windows():
    spec = SpecStats()
    record_forward(spec, emitted=3, saved=2)
    record_forward(spec, emitted=1)
    assert (spec.target_forwards, spec.emitted_tokens, spec.forwards_saved) == (2, 4, 2)
    assert spec.tokens_per_forward == 2.0

    recent = RecentAcceptance()
    assert recent.rate is None
    for _ in range(40):
        recent.add(4, 0)
    recent.add(4, 4)
    assert 0 < recent.rate < 0.1  # only the last rounds count

    totals, window = SpecStats(), RecentTotals(window_s=10.0)
    totals.draft_tokens = 100
    assert window.update(0.0, totals).draft_tokens == 100
    totals.draft_tokens = 130
    assert window.update(5.0, totals).draft_tokens == 130  # everything is recent still
    totals.draft_tokens = 150
    assert window.update(12.0, totals).draft_tokens == 50  # since the snapshot at t=0
    assert window.update(16.0, totals).draft_tokens == 20  # since t=5


# -- the auto policy ---------------------------------------------------------------------------


def test_expected_tokens_matches_the_geometric_series():
    assert expected_tokens(0.0, 4) == 1.0
    assert expected_tokens(1.0, 4) == 5.0
    assert expected_tokens(0.5, 2) == pytest.approx(1 + 0.5 + 0.25)


def test_cost_model_prior_then_measurements():
    costs = CostModel()
    assert costs.relative(4, 1) == 1.0
    assert costs.relative(1, 5) > 1.0  # a prior until measured
    costs.record(1, 1, 0.200)  # a shape's first time (a graph build) is left out
    costs.record(1, 5, 0.500)
    assert not costs.seconds
    costs.record(1, 1, 0.010)
    costs.record(1, 5, 0.013)
    assert costs.relative(1, 5) == pytest.approx(1.3)
    costs.record(1, 5, 0.023)  # a slow round (a one-off cost) does not move it
    assert costs.relative(1, 5) == pytest.approx(1.3)
    for _ in range(2):
        costs.record(2, 1, 0.010)
        costs.record(2, 3, 0.005)
    assert costs.relative(2, 3) == 1.0  # never cheaper than a plain step


def test_cost_model_prior_carries_a_rounds_fixed_cost_to_wider_widths():
    """On a GPU a verify round's fixed cost (drafting, read-back, no pipelining) dwarfs its
    width: a width not yet measured is priced from the widest narrower one measured."""
    costs = CostModel()
    for _ in range(2):
        costs.record(1, 1, 0.010)
        costs.record(1, 2, 0.025)
    assert costs.relative(1, 5) == pytest.approx(2.5 + 3 * 0.15)
    assert costs.relative(32, 5) <= 5.0  # unmeasured: never above five plain steps
    policy = AutoPolicy(costs=costs)
    # acceptance 0.6 does not pay for such rounds; 0.95 does, at the widest width
    assert policy.choose([0.6], 1, 4) == [0]
    assert policy.choose([0.95], 1, 4) == [4]
    # at a large batch too: a row that always keeps its one draft tries a wider width
    wide = CostModel()
    measure(wide, 16, {1: 0.010, 2: 0.013})
    assert AutoPolicy(costs=wide).choose([0.98] * 16, 16, 4)[0] > 1
    # once a wide width is measured, the ones between are read off the line, not re-tried
    measure(wide, 16, {9: 0.040})
    assert wide.relative(16, 5) == pytest.approx(1.3 + 3 / 7 * (4.0 - 1.3))


def measure(costs: CostModel, batch: int, seconds: dict[int, float]) -> None:
    """Each width timed twice (a shape's first time is left out)."""
    for _ in range(2):
        for width, s in seconds.items():
            costs.record(batch, width, s)


def test_auto_drafts_when_acceptance_pays_and_stops_when_it_loses():
    policy = AutoPolicy()
    measure(policy.costs, 1, {w: 0.010 * (1 + 0.05 * (w - 1)) for w in range(1, 18)})
    assert policy.choose([0.9], batch=1, k_max=16)[0] >= 4
    assert policy.choose([0.05], batch=1, k_max=16) == [0]
    expensive = AutoPolicy()
    # verification costs a step per token
    measure(expensive.costs, 1, {w: 0.010 * w for w in range(1, 18)})
    assert expensive.choose([0.7], batch=1, k_max=16) == [0]


def test_auto_verifies_at_one_of_a_few_widths_where_shapes_are_dear():
    """On CUDA each new width is a new shape to build and measure: auto keeps to a few there,
    and uses every width elsewhere."""
    anywhere = AutoPolicy()
    measure(anywhere.costs, 2, {w: 0.010 * (1 + 0.05 * (w - 1)) for w in range(1, 18)})
    assert anywhere.choose([0.55, 0.55], batch=2, k_max=16) == [3, 3]  # width 4
    policy = AutoPolicy(few_widths=True)
    measure(policy.costs, 2, {w: 0.010 * (1 + 0.05 * (w - 1)) for w in range(1, 18)})
    for rates in ([0.5, 0.3], [0.7, 0.2], [0.8, 0.8], [0.99, 0.1], [0.6, 0.6]):
        ks = policy.choose(rates, batch=2, k_max=16)
        assert max(ks) + 1 in (1, *DEFAULT_FEW_WIDTHS), (rates, ks)
    assert policy.choose([0.99, 0.99], batch=2, k_max=16) == [16, 16]
    assert max(policy.choose([0.99], batch=2, k_max=6)) == 4  # widest allowed under 7: 5


def test_auto_picks_k_per_row_within_the_batchs_width():
    """A rarely accepted row drafts less or nothing while its neighbours draft more."""
    policy = AutoPolicy()
    measure(policy.costs, 3, {w: 0.010 * (1 + 0.05 * (w - 1)) for w in range(1, 18)})
    good, fair, poor = policy.choose([0.9, 0.3, 0.05], batch=3, k_max=8)
    assert good >= 4 and fair == 1 and poor == 0


def test_auto_probes_again_after_a_while_of_plain_decoding():
    policy = AutoPolicy()
    choices = [policy.choose([0.0], batch=1, k_max=8) for _ in range(DEFAULT_PROBE_EVERY)]
    assert choices[:-1] == [[0]] * (DEFAULT_PROBE_EVERY - 1)
    assert choices[-1] == [1]


def test_cost_model_keeps_the_least_recent_timing_and_follows_a_lasting_change():
    costs = CostModel()
    measure(costs, 2, {1: 0.010, 3: 0.015})
    for spike in (0.100, 0.080):  # a shape built again, a collection pause
        costs.record(2, 3, spike)
    assert costs.relative(2, 3) == pytest.approx(1.5)
    for _ in range(DEFAULT_WINDOW):  # it now really costs more
        costs.record(2, 3, 0.030)
    assert costs.relative(2, 3) == pytest.approx(3.0)


def test_a_new_batch_size_borrows_the_nearest_measured_rounds_extra_seconds():
    """Rows join and leave all the time: a batch size whose rounds are not measured yet is
    priced from the nearest one whose are (a round's extra seconds over a plain step), not by
    the prior (which at 16 rows priced every width out)."""
    costs = CostModel()
    measure(costs, 4, {1: 0.010, 5: 0.015})
    measure(costs, 16, {1: 0.020, 5: 0.040})
    assert costs.relative(6, 5) > 1.0  # its plain step not timed yet: the prior
    measure(costs, 6, {1: 0.012})
    assert costs.relative(6, 5) == pytest.approx((0.012 + 0.005) / 0.012)
    measure(costs, 12, {1: 0.018})
    assert costs.relative(12, 5) == pytest.approx((0.018 + 0.020) / 0.018)
    measure(costs, 1, {1: 0.004})
    assert costs.relative(1, 5) == pytest.approx((0.004 + 0.005) / 0.004)
    measure(costs, 6, {5: 0.013})  # its own timings, once it has them
    assert costs.relative(6, 5) == pytest.approx(0.013 / 0.012)


def test_row_acceptance_decays_towards_recent_rounds():
    row = RowAcceptance()
    for _ in range(20):
        row.update(4, 4)
    high = row.rate
    for _ in range(5):
        row.update(4, 0)
    assert high > 0.9 and row.rate < high - 0.3


def _state(method: SpecMethod, k: int = 4, max_tokens: int = 64) -> RequestState:
    request = GenerationRequest(
        prompt_tokens=[1, 2, 3],
        max_tokens=max_tokens,
        speculative=SpeculativeParams(method=method, draft_tokens=k),
    )
    return RequestState(request, [1, 2, 3], RowSampler(request.sampling), None, max_tokens)


def test_policy_plans_each_method_and_respects_the_reply_end():
    policy = SpeculationPolicy(drafters=frozenset({"lookup"}))
    rows = [
        _state(SpecMethod.OFF),
        _state(SpecMethod.PROMPT_LOOKUP, k=3),
        _state(SpecMethod.PROMPT_LOOKUP, k=8, max_tokens=3),
    ]
    plan = policy.plan(rows)
    assert (plan[0].drafter, plan[0].k) == (None, 0)
    assert (plan[1].drafter, plan[1].k) == ("lookup", 3)
    assert plan[2].k == 2  # drafts past the reply's end are wasted
    with pytest.raises(ValueError, match="needs a draft model"):
        policy.check(SpeculativeParams(method=SpecMethod.DRAFT_MODEL))
    # a draft model unloaded while a row that asked for it runs: plain, and the row says why
    orphan = policy.plan([_state(SpecMethod.DRAFT_MODEL)])[0]
    assert (orphan.drafter, orphan.k) == (None, 0)
    assert "draft model" in orphan.note


def test_a_new_auto_row_starts_from_what_auto_rows_were_kept_lately():
    """Short replies end before a row that starts from a pessimistic prior has drafted enough
    to learn otherwise: a new row starts where its neighbours and predecessors are."""
    policy = SpeculationPolicy(drafters=frozenset({"lookup"}))
    first = _state(SpecMethod.AUTO)
    policy.plan([first])
    assert policy._acceptance[first.request_id].rate == pytest.approx(0.6)
    for _ in range(10):
        policy.observe(first.request_id, 4, 4)
    policy.observe("a fixed-method row", 4, 0)  # not an auto row: not counted
    second = _state(SpecMethod.AUTO)
    policy.plan([first, second])
    assert policy._acceptance[second.request_id].rate > 0.95
    for _ in range(10):
        policy.observe(second.request_id, 4, 0)
    third = _state(SpecMethod.AUTO)
    policy.plan([third])
    assert policy._acceptance[third.request_id].rate < 0.4


def test_policy_auto_uses_the_rows_own_draft_model_when_it_has_one():
    mine, other = draft_drafter_name("/models/mine"), draft_drafter_name("/models/other")
    with_draft, without = _state(SpecMethod.AUTO), _state(SpecMethod.AUTO)
    with_draft.draft = mine
    policy = SpeculationPolicy(drafters=frozenset({"lookup", mine, other}))
    first, second = policy.plan([with_draft, without])
    assert first.k == 0 or first.drafter == mine
    assert second.k == 0 or second.drafter == "lookup"  # another row's draft is not its own
    assert SpeculationPolicy(drafters=frozenset({"lookup"})).plan([with_draft])[0].drafter in (
        "lookup",
        None,
    )  # its draft model was unloaded: prompt lookup


def test_policy_auto_lets_a_strong_lookup_match_draft_before_a_model_drafter():
    mine = draft_drafter_name("/models/mine")
    with_draft, without = _state(SpecMethod.AUTO), _state(SpecMethod.AUTO)
    with_draft.draft = mine
    fixed = _state(SpecMethod.DRAFT_MODEL)
    fixed.draft = mine
    policy = SpeculationPolicy(drafters=frozenset({"lookup", mine}))
    first, second, third = policy.plan([with_draft, without, fixed])
    assert first.drafter == mine and first.lookup_first  # auto: lookup first, then the draft
    assert not second.lookup_first  # already drafting by lookup
    assert not third.lookup_first  # "draft" asked for the draft model: only it drafts
    alone = SpeculationPolicy(drafters=frozenset({mine})).plan([with_draft])[0]
    assert not alone.lookup_first  # no lookup drafter on this engine


def test_strong_match_needs_three_tokens_of_context():
    from engine.speculative.prompt_lookup import strong_match

    tokens = [5, 6, 7, 8, 9, 1, 2, 5, 6, 7]
    assert strong_match(tokens, 2, ngram_max=4, window=100) == [8, 9]
    assert strong_match([5, 6, 8, 9, 1, 5, 6], 2, ngram_max=4, window=100) == []  # two only
    assert strong_match(tokens, 2, ngram_max=2, window=100) == []


def test_shadow_draft_scores_the_prefix_the_row_then_produced():
    from engine.speculative.shadow_lookup import ShadowDraft

    shadow = ShadowDraft(start=2, tokens=(7, 8, 9))
    assert shadow.score([1, 2]) is None  # nothing produced since
    assert shadow.score([1, 2, 7, 8]) is None  # all matching so far
    assert shadow.score([1, 2, 7, 8, 9]) == 3
    assert shadow.score([1, 2, 7, 5]) == 1  # a mismatch tells at once
    assert shadow.score([1, 2, 4]) == 0


def test_an_auto_row_decoding_plainly_learns_from_lookup_drafts_it_did_not_verify():
    """A row whose rounds were rejected stops verifying; when its reply then repeats itself,
    what prompt lookup would have drafted is scored against what it produced, and once that
    pays for a round's cost the row drafts again (on the H200 such a row decoded a whole reply
    plainly while fixed prompt lookup was accepted almost always)."""
    policy = SpeculationPolicy(drafters=frozenset({"lookup"}))
    measure(policy.costs, 1, {1: 0.003, 5: 0.008, 9: 0.0085, 17: 0.009})  # rounds ~3 steps
    row = _state(SpecMethod.AUTO, max_tokens=200)
    policy.plan([row])
    for _ in range(5):
        policy.observe(row.request_id, 4, 0)  # its first rounds were all rejected
    loop = [11, 12, 13, 14, 15]
    chosen = []
    for step in range(30):
        chosen.append(policy.plan([row])[0].k)
        row.generated.append(loop[step % len(loop)])  # the plain step's token
    assert chosen[:3] == [0, 0, 0]
    assert max(chosen) > 0, chosen
    first = chosen.index(max(chosen))
    assert first < 20  # within a few of its drafts' outcomes


def test_shadow_lookups_lower_the_rate_of_a_row_lookup_would_not_serve():
    policy = SpeculationPolicy(drafters=frozenset({"lookup"}))
    measure(policy.costs, 1, {w: 0.003 * w for w in range(1, 18)})  # rounds never pay
    row = _state(SpecMethod.AUTO, max_tokens=200)
    policy.plan([row])
    before = policy._acceptance[row.request_id].rate
    tokens = [1, 2, 3, 1, 4, 2, 5, 3, 6, 1, 7, 2, 8, 3, 9]  # never follows its own history
    for token in tokens:
        policy.plan([row])
        row.generated.append(token)
    assert policy._acceptance[row.request_id].rate < before
    policy.forget(row.request_id)
    assert row.request_id not in policy._shadows


def test_shadow_lookups_are_for_auto_rows_whose_round_does_not_draft_by_lookup():
    mine = draft_drafter_name("/models/mine")
    with_draft, fixed = _state(SpecMethod.AUTO, max_tokens=200), _state(SpecMethod.PROMPT_LOOKUP)
    with_draft.draft = mine
    policy = SpeculationPolicy(drafters=frozenset({"lookup", mine}))
    measure(policy.costs, 1, {w: 0.003 * w for w in range(1, 18)})  # rounds never pay
    with_draft.generated += [1, 2, 3]
    fixed.generated += [1, 2, 3]
    policy.plan([fixed])
    assert not policy._shadows  # a fixed method verifies its own drafts anyway
    assert policy.plan([with_draft])[0].k == 0
    assert set(policy._shadows) == {with_draft.request_id}  # plain: lookup drafts aside


def test_an_auto_row_with_a_model_drafter_drafts_by_lookup_where_lookup_is_kept_more():
    """Rewrite prompts: the trained head's drafts are kept less often than prompt lookup's; an
    auto row switches to lookup while lookup's acceptance for it is the higher, and back."""
    mine = draft_drafter_name("/models/mine")
    row = _state(SpecMethod.AUTO, max_tokens=200)
    row.draft = mine
    policy = SpeculationPolicy(drafters=frozenset({"lookup", mine}))
    measure(policy.costs, 1, {w: 0.010 * (1 + 0.05 * (w - 1)) for w in range(1, 18)})
    first = policy.plan([row])[0]
    assert first.drafter == mine and first.lookup_first
    for _ in range(6):
        policy.observe(row.request_id, 4, 0, drafter=mine)  # the model's drafts: rejected
        policy.observe(row.request_id, 4, 4, drafter="lookup")  # a strong match: kept
    choice = policy.plan([row])[0]
    assert choice.drafter == "lookup" and choice.k >= 4 and not choice.lookup_first
    assert policy._acceptance[row.request_id].rate < 0.2  # the model's own count is apart
    for _ in range(8):
        policy.observe(row.request_id, 4, 0, drafter="lookup")
        policy.observe(row.request_id, 4, 4, drafter=mine)
    assert policy.plan([row])[0].drafter == mine
    policy.forget(row.request_id)
    assert row.request_id not in policy._lookup_acceptance


def test_shadow_lookups_scan_a_bounded_history_per_step_and_take_rows_in_turn():
    from engine.speculative.shadow_lookup import DEFAULT_SHADOW_BUDGET

    policy = SpeculationPolicy(drafters=frozenset({"lookup"}))
    measure(policy.costs, 6, {w: 0.003 * w for w in range(1, 18)})  # rounds never pay
    rows = [_state(SpecMethod.AUTO, max_tokens=9000) for _ in range(6)]
    for row in rows:
        row.generated += [7, 8, 9] * 1400  # long, and lookup always matches
    policy.plan(rows)
    per_step = -(-DEFAULT_SHADOW_BUDGET // 4096)
    assert len(policy._shadows) == per_step
    policy.plan(rows)  # theirs are unresolved: the next rows get one
    assert len(policy._shadows) == 2 * per_step
