"""A reply's speed without its own drafts (engine/speculative/plain_estimate.py), the panel's
"Plain decoding" figure and the yardstick of its verdict: a row that never drafted reads its own
rate (an "off" chat beside speculating ones once read 0.7x "plain"), a draft that widens the
forward is charged the widening, and one inside a width the neighbours forced costs nothing."""

from __future__ import annotations

import pytest

from engine.core.step_plan import TokenRun
from engine.requests import FinishedEvent, GenerationRequest
from engine.speculative.auto import CostModel
from engine.speculative.plain_estimate import Forward, PlainEstimate, note_runs
from tests.engine.engine_harness import P_A, P_B, make_core, measure, synthetic

pytestmark = pytest.mark.timeout(120)

STEP = 0.05  # a plain step of two rows; five wide costs 1.6 of it
TWO_ROWS = {1: STEP, 2: 0.06, 5: 0.08}


def _costs() -> CostModel:
    costs = CostModel()
    measure(costs, 2, TWO_ROWS)
    return costs


def _note(runs: dict[str, list[TokenRun]], costs: CostModel, batch: int = 2):
    estimates = {rid: PlainEstimate(costs) for rid in runs}
    note_runs(batch, runs, estimates)
    return estimates


def test_a_draft_that_widens_the_forward_pays_for_it():
    est = _note({"spec": [TokenRun([7], [1, 2, 3, 4], 0)], "off": [TokenRun([9])]}, _costs())
    spec, off = est["spec"], est["off"]
    assert spec.forwards == {Forward(2, 5, 1, 1): 1}
    # one token in 10 s, of which 0.08 s the wide forward: without the draft, 0.03 s less
    assert spec.rate(1, 10.0) == pytest.approx(1 / (10.0 - 0.03))
    # the neighbour waited on the wide forward, but not for drafts of its own
    assert not off.forwards and off.rate(1, 10.0) == pytest.approx(0.1)


def test_drafts_inside_a_width_the_neighbours_forced_cost_nothing():
    runs = {"short": [TokenRun([5, 6], [5], 1)], "wide": [TokenRun([1, 2, 3], [1, 2, 8, 9], 2)]}
    short = _note(runs, _costs())["short"]
    assert short.forwards == {Forward(2, 5, 5, 2): 1}
    # two tokens from one forward five wide, where plain would have run two of them
    assert short.rate(2, 1.0) == pytest.approx(2 / (1.0 + 0.08))


def test_forwards_are_priced_once_their_batch_size_is_measured():
    costs = CostModel()
    spec = _note({"spec": [TokenRun([7], [1, 2, 3, 4], 0)]}, costs)["spec"]
    assert spec.rate(1, 1.0) is None  # it drafted, and no plain step is measured yet
    measure(costs, 2, TWO_ROWS)
    assert spec.rate(1, 1.0) == pytest.approx(1 / (1.0 - 0.03))
    assert PlainEstimate().rate(0, 1.0) is None


def test_replies_report_their_plain_rate_off_rows_their_own(tiny):
    """Two greedy replies in one batch: one drafting its whole reply's first half, every draft
    kept, then decoding plainly (its drafter's reference ends there), reads a plain rate below
    its rate; the "off" row beside it reads exactly its own rate."""
    core = make_core(tiny)
    reference = tiny.greedy(P_B, 24)
    spec = GenerationRequest(
        prompt_tokens=P_B, max_tokens=48, speculative=synthetic(P_B, reference, 1.0, 4)
    )
    off = GenerationRequest(prompt_tokens=P_A, max_tokens=48)
    core.add(spec)
    core.add(off)
    finished = {}
    for _ in range(400):
        for event in core.step():
            if isinstance(event, FinishedEvent):
                finished[event.request_id] = event.stats
        if not core.has_work():
            break
    ran_spec, ran_off = finished[spec.request_id], finished[off.request_id]
    assert ran_off.plain_tokens_per_s == pytest.approx(ran_off.decode_tokens_per_s)
    assert ran_spec.spec.rounds >= 4
    assert ran_spec.plain_tokens_per_s is not None
    assert ran_spec.plain_tokens_per_s < ran_spec.decode_tokens_per_s
