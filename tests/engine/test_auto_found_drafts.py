"""auto prices a row's drafts by how often its drafter finds one (engine/speculative/auto.py):
prompt lookup has nothing for a row whose last tokens match nothing earlier, and such a row
gets one token from the round's wide forward. The misses come from verify rounds, from rounds
that found no draft at all (they run as plain steps) and from the shadow lookups of rows
decoding plainly."""

from __future__ import annotations

import pytest

from engine.core.request_state import RequestState
from engine.requests import GenerationRequest, SpecMethod, SpeculativeParams
from engine.sampling import RowSampler
from engine.speculative.auto import AutoPolicy, RowAcceptance, expected_tokens
from engine.speculative.policy import SpeculationPolicy
from tests.engine.engine_harness import P_A, Driver, make_core, measure

pytestmark = pytest.mark.timeout(120)

# a CPU-like batch of four: a 3-wide round costs 1.5 plain steps
FOUR_ROWS = {1: 0.055, 2: 0.070, 3: 0.0825, 4: 0.095, 5: 0.11}


def _auto_row(history: list[int], max_tokens: int = 64) -> RequestState:
    request = GenerationRequest(
        prompt_tokens=history,
        max_tokens=max_tokens,
        speculative=SpeculativeParams(method=SpecMethod.AUTO, draft_tokens=4),
    )
    return RequestState(request, history, RowSampler(request.sampling), None, max_tokens)


def test_a_rows_counts_learn_how_often_a_draft_is_found():
    counts = RowAcceptance()
    assert counts.found_rate == 1.0  # taken to find one until seen not to
    counts.update(0, 0)  # a round it had no part in: says nothing
    assert counts.found_rate == 1.0
    for _ in range(6):
        counts.miss()
    assert counts.found_rate < 0.3
    rate = counts.rate
    for _ in range(6):
        counts.update(3, 3)
    assert counts.found_rate > 0.7 and counts.rate > rate
    assert RowAcceptance.starting_at(0.5, 0.25).found_rate == pytest.approx(0.25)


def test_auto_prices_drafts_by_the_chance_one_is_found():
    assert expected_tokens(0.5, 2, 0.5) == pytest.approx(1 + 0.5 * 0.75)
    assert expected_tokens(0.5, 0, 0.0) == 1.0
    policy = AutoPolicy()
    measure(policy.costs, 4, FOUR_ROWS)
    # four rows keeping half their drafts pay for a round when each has a draft...
    assert any(policy.choose([0.5] * 4, batch=4, k_max=4))
    # ...not when lookup finds one for only half of the rows asked
    assert policy.choose([0.5] * 4, batch=4, k_max=4, found=[0.5] * 4) == [0] * 4
    # a row that rarely has a draft leaves the width to its neighbours
    assert policy.choose([0.9, 0.9, 0.9, 0.9], batch=4, k_max=4, found=[1, 1, 1, 0.3])


def test_the_policy_learns_misses_and_new_rows_start_from_them():
    policy = SpeculationPolicy(drafters=frozenset({"lookup"}))
    first = _auto_row([1, 2, 3])
    policy.plan([first])
    for _ in range(8):
        policy.missed(first.request_id, "lookup")
    assert policy._acceptance[first.request_id].found_rate < 0.3
    policy.missed("a fixed-method row", "lookup")  # not an auto row: nothing to learn
    second = _auto_row([4, 5, 6])
    policy.plan([first, second])
    assert policy._acceptance[second.request_id].found_rate < 0.5  # the pool's


def test_a_shadow_lookup_that_finds_nothing_counts_as_a_miss():
    policy = SpeculationPolicy(drafters=frozenset({"lookup"}))
    row = _auto_row(list(range(10, 40)))  # no token repeats: lookup has no match
    policy.plan([row])
    for _ in range(10):
        policy.observe(row.request_id, 4, 0)  # rarely kept: the row decodes plainly
    before = policy._acceptance[row.request_id].found_rate
    assert policy.plan([row])[0].k == 0
    assert policy._acceptance[row.request_id].found_rate < before


def test_rounds_whose_drafter_found_nothing_teach_auto_to_stop_asking(tiny):
    """A lookup drafter with nothing for the row: the first rounds find no draft and run as
    plain steps; auto learns it and stops asking, and the reply stays greedy."""
    core = make_core(tiny)
    lookup = core.executor.drafters["lookup"]
    asked = []

    def nothing(rows):
        asked.append(len(rows))
        return [[] for _ in rows]

    lookup.propose = nothing
    driver = Driver(core)
    rid = driver.add(
        P_A,
        max_tokens=40,
        speculative=SpeculativeParams(method=SpecMethod.AUTO, draft_tokens=4),
    )
    driver.finish()
    assert driver.tokens[rid] == tiny.greedy(P_A, 40)
    assert 0 < len(asked) < 20  # stopped asking well before the reply's 40 tokens


# a CPU-like batch of two: each verified token past the first costs a fifth of a step
TWO_ROWS = {1: 0.05, 2: 0.06, 3: 0.07, 4: 0.08, 5: 0.09}


def test_a_neighbours_width_is_priced_by_how_often_its_drafts_are_found():
    """A fixed method's row forces its width only when its drafter finds a draft: beside a
    draft model's row (always) a rarely kept auto row's draft rides free; beside prompt lookup
    that finds one a third of the time, it would mostly widen a plain step, and it waits."""
    policy = AutoPolicy()
    measure(policy.costs, 2, TWO_ROWS)
    assert policy.choose([0.12], batch=2, k_max=4, forced=[(5, 1.0)]) == [1]
    assert policy.choose([0.12], batch=2, k_max=4, forced=[(5, 0.3)]) == [0]
    assert policy.choose([0.9], batch=2, k_max=4, forced=[(5, 0.3)]) != [0]  # well kept: drafts


def test_the_policy_learns_how_often_a_fixed_rows_drafter_finds_one():
    policy = SpeculationPolicy(drafters=frozenset({"lookup"}))
    measure(policy.costs, 2, TWO_ROWS)
    auto = _auto_row([1, 2, 3])
    request = GenerationRequest(
        prompt_tokens=[7, 8, 9],
        max_tokens=64,
        speculative=SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=4),
    )
    fixed = RequestState(request, [7, 8, 9], RowSampler(request.sampling), None, 64)
    policy.plan([auto, fixed])
    for kept in [1] + [0] * 6:  # rarely kept
        policy.observe(auto.request_id, 1, kept)
    assert 0.1 < policy._acceptance[auto.request_id].rate < 0.2
    assert policy.plan([auto, fixed])[0].k  # the lookup row is taken to find drafts
    for _ in range(8):
        policy.missed(fixed.request_id, "lookup")
    assert policy.plan([auto, fixed])[0].k == 0
    policy.forget(fixed.request_id)
    assert fixed.request_id not in policy._fixed_found


def test_a_row_drafts_by_lookup_only_where_its_drafts_would_yield_more_found_or_not():
    """Lookup's drafts kept 80% of the time but found for one round in five yield less than a
    model drafter's kept half the time and always there."""
    policy = SpeculationPolicy(drafters=frozenset({"lookup", "mtp"}))
    row = _auto_row([1, 2, 3])
    policy.plan([row])
    for _ in range(6):
        policy.observe(row.request_id, 4, 2, drafter="mtp")
        policy.observe(row.request_id, 4, 4, drafter="lookup")
    assert policy.plan([row])[0].drafter == "lookup"  # found every time: lookup's
    for _ in range(8):
        policy.missed(row.request_id, "lookup")
    lookup = policy._lookup_acceptance[row.request_id]
    assert lookup.rate > policy._acceptance[row.request_id].rate and lookup.found_rate < 0.3
    assert policy.plan([row])[0].drafter == "mtp"
