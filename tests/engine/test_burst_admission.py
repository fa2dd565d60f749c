"""Prompts that arrive together are prefilled in whole chunks, not paced against their own first
rows (engine/core/bursts.py): on the 2-core CPU a burst of 16 prompts of 256
tokens joined one row every four steps. A chat that was decoding before a prompt arrived, or that
arrived well apart from it, keeps its bounded gap. Every reply stays exactly mlx_lm.generate's."""

from __future__ import annotations

import time

import pytest

from engine.core.bursts import DEFAULT_BURST_S, owed_a_gap
from tests.engine.engine_harness import P_A, Driver, make_core, make_prompt

pytestmark = pytest.mark.timeout(120)

BURST = [make_prompt(30 + i, 100 + 7 * i) for i in range(4)]
CHUNK = 128  # a step's whole prompt budget
PACED = 16  # the budget while rows are owed a gap


class _Row:
    def __init__(self, arrival: float, joined_at: float | None = None) -> None:
        self.arrival, self.joined_at = arrival, joined_at


def test_who_is_owed_a_gap():
    w = DEFAULT_BURST_S
    burst_row, burst_prompt = _Row(10.0, joined_at=11.0), _Row(10.0 + w / 2)
    assert not owed_a_gap([burst_row], [burst_prompt])  # arrived together, joined after
    assert not owed_a_gap([], [burst_prompt]) and not owed_a_gap([burst_row], [])
    assert owed_a_gap([_Row(5.0, joined_at=6.0)], [burst_prompt])  # talking before it came
    assert owed_a_gap([_Row(10.0 + 2 * w, joined_at=11.0)], [_Row(10.0)])  # came apart
    assert owed_a_gap([_Row(10.0)], [burst_prompt])  # not joined yet: the safe answer
    assert owed_a_gap([burst_row, _Row(0.0, joined_at=1.0)], [burst_prompt])  # any row owed
    assert owed_a_gap([burst_row], [burst_prompt, _Row(10.0 + 3 * w)])  # any prompt apart
    assert owed_a_gap([burst_row], [burst_prompt], burst_s=-1.0)  # bursts off


def _paced_core(tiny):
    """A core whose pacer keeps the least chunk beside decoding rows: every step it paces
    shows as a step of at most PACED prompt tokens."""
    core = make_core(tiny, prefill_chunk=CHUNK)
    pacer = core.scheduler.pacer
    pacer.chunk = PACED
    pacer.observe = lambda *args, **kwargs: None  # this machine's timings would move it
    return core


def _record(core, slivers: list | None = None) -> list:
    """Every plan from now on; `slivers`: the steps whose padded forward carried a chunk cut
    short by the budget at under half the first chunk's width."""
    plans: list = []
    schedule = core.scheduler.schedule

    def recording():
        plan = schedule()
        plans.append(plan)
        if slivers is not None and plan.prefill:
            first = plan.prefill[0].tokens + plan.prefill[0].pad
            for c in plan.prefill[1:]:
                cut = c.state.prefilled + c.tokens < len(c.state.prompt) - 1
                if cut and 2 * (c.tokens + c.pad) < first:
                    slivers.append([(c.tokens, c.pad) for c in plan.prefill])
        return plan

    core.scheduler.schedule = recording
    return plans


def test_a_burst_takes_whole_chunks_beside_its_own_first_rows(tiny):
    core = _paced_core(tiny)
    slivers: list = []
    plans = _record(core, slivers)
    driver = Driver(core)
    ids = [driver.add(p, max_tokens=8) for p in BURST]
    driver.until(lambda: all(driver.tokens[i] for i in ids), limit=40)
    beside = [p for p in plans if p.prefill and p.decode]
    assert beside, "the first rows decoded while the rest of the burst was prefilled"
    assert not any(p.paced for p in beside)
    assert max(sum(c.tokens for c in p.prefill) for p in beside) > PACED
    # 434 prompt tokens in steps of up to 128: a handful of steps of prompt work, not 27 of 16
    assert sum(1 for p in plans if p.prefill) <= 7
    assert not slivers, "no step padded a sliver of its budget to the first chunk's width"
    driver.finish()
    for i, prompt in zip(ids, BURST):
        assert driver.tokens[i] == tiny.greedy(prompt, 8)


def test_a_chat_decoding_before_the_burst_keeps_its_gap(tiny):
    core = _paced_core(tiny)
    driver = Driver(core)
    chat = driver.add(P_A, max_tokens=60)
    driver.until(lambda: bool(driver.tokens[chat]))
    plans = _record(core)
    ids = [driver.add(p, max_tokens=8) for p in BURST]
    driver.until(lambda: all(driver.tokens[i] for i in ids), limit=200)
    beside = [p for p in plans if p.prefill and p.decode]
    assert beside and all(p.paced for p in beside)
    assert max(sum(c.tokens + c.pad for c in p.prefill) for p in beside) <= PACED
    driver.finish()
    assert driver.tokens[chat] == tiny.greedy(P_A, 60)
    for i, prompt in zip(ids, BURST):
        assert driver.tokens[i] == tiny.greedy(prompt, 8)


def test_a_chat_that_arrived_apart_from_a_long_prompt_keeps_its_gap(tiny):
    """A chat's next message arrives while a long prompt is prefilled: it joins the batch after
    the long prompt arrived, yet it is no part of that prompt's burst."""
    core = _paced_core(tiny)
    plans = _record(core)
    driver = Driver(core)
    long = driver.add(make_prompt(40, 400), max_tokens=4)
    driver.step()
    driver.step()  # under way, in whole chunks: nobody decodes
    (state,) = core.scheduler.prefilling
    assert 0 < state.prefilled < 400 - 1 - PACED
    state.arrival = time.perf_counter() - 2 * DEFAULT_BURST_S
    chat = driver.add(P_A, max_tokens=30)
    driver.until(lambda: bool(driver.tokens[chat]))
    plans.clear()
    driver.until(lambda: bool(driver.tokens[long]), limit=200)
    beside = [p for p in plans if p.prefill and p.decode]
    assert beside and all(p.paced for p in beside)
    assert max(sum(c.tokens + c.pad for c in p.prefill) for p in beside) <= PACED
    driver.finish()
    assert driver.tokens[chat] == tiny.greedy(P_A, 30)
    assert driver.tokens[long] == tiny.greedy(make_prompt(40, 400), 4)


def test_a_row_that_joins_beside_prompt_work_gets_its_first_token_in_that_step(tiny):
    """That step's prompt work waits for its forward, so the row's token is read there and
    then (read in the next step, it reached the user one whole chunk later)."""
    core = _paced_core(tiny)
    plans = _record(core)
    driver = Driver(core)
    ids = [driver.add(p, max_tokens=8) for p in BURST]
    first_at: dict[str, int] = {}
    while len(first_at) < len(ids):
        driver.step()
        first_at.update({i: len(plans) for i in ids if driver.tokens[i] and i not in first_at})
    joined_at = {s.request_id: n for n, p in enumerate(plans, 1) for s in p.join}
    beside = [i for i in ids if plans[joined_at[i] - 1].prefill]
    assert beside, "rows joined in steps that also processed prompts"
    assert all(first_at[i] == joined_at[i] for i in beside), (first_at, joined_at)
    driver.finish()
    for i, prompt in zip(ids, BURST):
        assert driver.tokens[i] == tiny.greedy(prompt, 8)
