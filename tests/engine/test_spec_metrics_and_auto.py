"""Speculation figures as users read them (tokens per forward exactly 1.00 without speculation,
forwards saved never decreasing, recent totals) and the auto policy's choices and cost model."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from engine.requests import GenerationRequest, RequestStats, SpecStats
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
from tests.engine.engine_harness import P_A, P_B, P_C, collect, measure, synthetic, with_engine

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


def test_stats_copies_share_nothing_mutable():
    """Events carry copies of a row's stats while the row goes on counting (copied by hand,
    not deepcopy: a new list or dict field must be copied too, which this test catches)."""
    spec = SpecStats(rounds=3, accepted_by_position=[2, 1], drafted_by_position=[3, 2])
    spec.rounds_by_drafter["lookup"] = 3
    stats = RequestStats(prompt_tokens=5, spec=spec, speculation_note="n")
    twin = stats.copy()
    assert twin == stats and twin.spec is not spec
    for original, copied in ((stats, twin), (spec, twin.spec)):
        for f in dataclasses.fields(original):
            value = getattr(original, f.name)
            if isinstance(value, list | dict) or dataclasses.is_dataclass(value):
                assert getattr(copied, f.name) is not value, f.name
    record_round(spec, [1, 2, 3], 3, draft_s=0, verify_s=0, sample_s=0, drafter="head")
    assert twin.spec.rounds == 3 and twin.spec.accepted_by_position == [2, 1]
    assert twin.spec.rounds_by_drafter == {"lookup": 3}


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
