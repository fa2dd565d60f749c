"""A row that joins with a draft model has its history processed by the draft model inside the
running batch's verify rounds, so every running row waits for it. Beside running rows that
catch-up goes within the pacer's share of a round, not in whole prefill chunks; a row running
alone still catches up in whole chunks. Every reply stays exactly mlx_lm.generate's."""

from __future__ import annotations

import time

import pytest

from engine.models import load_model
from engine.requests import ErrorEvent, GenerationRequest, SpecMethod, SpeculativeParams, TokenEvent
from engine.speculative.catch_up_pacer import (
    DEFAULT_FIRST_CATCH_UP,
    DEFAULT_MIN_CATCH_UP,
    CatchUpPacer,
)
from engine.speculative.draft_model import DraftModelDrafter
from tests.engine.engine_harness import P_A, P_B, make_core, make_prompt

pytestmark = pytest.mark.timeout(120)

DRAFT = "draft:self"  # the target drafts for itself: every draft accepted once caught up
LONG = make_prompt(31, 400)
CHUNK = 512  # the drafter's whole chunk: more than the long prompt


def _core_with_draft(tiny, *, slow_s: list[float] | None = None):
    """A core whose draft model is the target itself; each catch-up forward is recorded, and
    takes `slow_s[0]` longer (a draft model dear to catch up with; a list, to be set later)."""
    core = make_core(tiny, prefill_chunk=64)
    drafter = DraftModelDrafter(load_model(str(tiny.path)), prefill_chunk=CHUNK)
    forwards: list[int] = []  # the width of each catch-up forward (a row's history, alone)
    model = drafter.model

    class Counting:
        def __getattr__(self, name):
            return getattr(model, name)

        def __call__(self, x, cache=None):
            if x.shape[0] == 1 and x.shape[1] > 1 and cache is not drafter._cache:
                forwards.append(x.shape[1])
                time.sleep(slow_s[0] if slow_s else 0.0)
            return model(x, cache=cache)

    drafter.model = Counting()
    core.set_drafter(drafter, name=DRAFT)
    return core, drafter, forwards


def _request(prompt: list[int], max_tokens: int) -> GenerationRequest:
    spec = SpeculativeParams(method=SpecMethod.DRAFT_MODEL, draft_tokens=3)
    return GenerationRequest(prompt_tokens=prompt, max_tokens=max_tokens, speculative=spec)


def _step(core, tokens: dict[str, list[int]]) -> None:
    for event in core.step():
        assert not isinstance(event, ErrorEvent), event
        if isinstance(event, TokenEvent):
            tokens.setdefault(event.request_id, []).extend(event.token_ids)


def test_a_long_history_catches_up_in_paced_rounds_beside_running_rows(tiny):
    core, drafter, forwards = _core_with_draft(tiny)
    tokens: dict[str, list[int]] = {}
    chats = [_request(P_A, 90), _request(P_B, 90)]
    for chat in chats:
        core.add(chat, draft=DRAFT)
    while len(drafter._ids) < 2:  # both chats drafting
        _step(core, tokens)
    forwards.clear()
    long = _request(LONG, 40)
    core.add(long, draft=DRAFT)
    while long.request_id not in drafter._ids:
        assert core.has_work()
        _step(core, tokens)
    # the prompt and the reply's first tokens, once, in pieces
    assert len(LONG) - 1 <= sum(forwards) < len(LONG) + 8, forwards
    assert forwards[0] <= DEFAULT_FIRST_CATCH_UP, forwards
    assert len(forwards) >= 2, forwards
    assert max(forwards) < len(LONG) - 1, forwards
    assert all(r.request_id in tokens for r in chats)
    while core.has_work():
        _step(core, tokens)
    assert tokens[long.request_id] == tiny.greedy(LONG, 40)
    for chat, prompt in zip(chats, (P_A, P_B)):
        assert tokens[chat.request_id] == tiny.greedy(prompt, 90)


def test_a_dear_catch_up_shrinks_to_the_least_chunk_and_is_not_taken_for_decoding(tiny):
    """Catch-up rounds are prompt work: counted as decode steps they raised the pacer's decode
    step, hence the share, hence the catch-up (on the 2-core CPU the median step went from
    0.8 s to 1.7 s while a 1,024-token history caught up)."""
    slow_s = [0.0]
    core, drafter, forwards = _core_with_draft(tiny, slow_s=slow_s)
    tokens: dict[str, list[int]] = {}
    chats = [_request(P_A, 200), _request(P_B, 200)]
    for chat in chats:
        core.add(chat, draft=DRAFT)
    while len(drafter._ids) < 2:
        _step(core, tokens)
    # dear against this machine's decode step: the share is 2 decode steps (gap factor 3), so
    # a round of 10 decode steps or more halves the next one, with room for a slower machine
    pacer = core.scheduler.pacer
    assert pacer.gap_factor == 3.0 and pacer.decode_s is not None
    slow_s[0] = max(0.2, 10 * pacer.decode_s)
    forwards.clear()
    long = _request(LONG[:200], 60)
    core.add(long, draft=DRAFT)
    while long.request_id not in drafter._ids:
        assert len(tokens.get(long.request_id, [])) < 60, "caught up before its reply ended"
        _step(core, tokens)
    assert forwards[:3] == [DEFAULT_FIRST_CATCH_UP, 32, DEFAULT_MIN_CATCH_UP], forwards
    # about nine rounds of slow_s or more: counted as decoding, each would be a step this long
    # (one or two such steps may be the machine's own stalls)
    dear = [t for t in pacer.decode_times if t >= slow_s[0]]
    assert len(dear) < 3, f"catch-up counted as decoding: {dear}"
    while core.has_work():
        _step(core, tokens)
    assert tokens[long.request_id] == tiny.greedy(LONG[:200], 60)


def test_a_row_running_alone_catches_up_in_whole_chunks(tiny):
    core, drafter, forwards = _core_with_draft(tiny)
    tokens: dict[str, list[int]] = {}
    long = _request(LONG, 12)
    core.add(long, draft=DRAFT)
    while core.has_work():
        _step(core, tokens)
    assert len(forwards) == 1 and forwards[0] >= len(LONG) - 1, "nobody waited: one forward"
    assert tokens[long.request_id] == tiny.greedy(LONG, 12)


def test_rows_of_one_burst_catch_up_in_whole_chunks(tiny):
    """Prompts that arrived together do not owe each other a gap (engine/core/scheduler.py):
    the long row's history goes in one forward beside the chats of its own burst."""
    core, drafter, forwards = _core_with_draft(tiny)
    tokens: dict[str, list[int]] = {}
    burst = [_request(P_A, 60), _request(P_B, 60), _request(LONG, 12)]
    for request in burst:
        core.add(request, draft=DRAFT)
    while core.has_work():
        _step(core, tokens)
    assert max(forwards) >= len(LONG) - 1, forwards
    for request, prompt in zip(burst, (P_A, P_B, LONG)):
        assert tokens[request.request_id] == tiny.greedy(prompt, request.max_tokens)


def test_the_budget_follows_the_measured_cost_within_its_bounds():
    pacer = CatchUpPacer(max_chunk=512)
    assert pacer.budget() == 512  # nobody waits
    pacer.share_s = 0.1
    assert pacer.budget() == DEFAULT_FIRST_CATCH_UP
    pacer.observe(64, 0.025)  # 64 tokens took a quarter of the share: at most twice as many
    assert pacer.budget() == 128
    pacer.observe(128, 0.4)  # four times the share: at most halved
    assert pacer.budget() == 64
    for _ in range(10):
        pacer.observe(pacer.budget(), 10.0)
    assert pacer.budget() == DEFAULT_MIN_CATCH_UP  # a long history still moves
    pacer.share_s = 0.0  # the step's prompt chunks took the share: the least, and no resize
    pacer.observe(16, 0.001)
    assert pacer.budget() == DEFAULT_MIN_CATCH_UP
    pow2 = CatchUpPacer(max_chunk=2048, pow2=True, chunk=300, share_s=0.1)
    assert pow2.budget() == 256


def test_one_stalled_round_among_a_sizes_rounds_does_not_halve_the_budget():
    """A round four times dearer than the latest of its size (a graph built again, another
    process) is priced at their median; a size that really grew dearer still moves it."""
    pacer = CatchUpPacer(max_chunk=512, share_s=0.1)
    for _ in range(4):
        pacer.observe(64, 0.1)  # exactly the share
    assert pacer.budget() == 64
    pacer.observe(64, 0.4)
    assert pacer.budget() == 64
    for _ in range(3):
        pacer.observe(pacer.budget(), 0.4 * pacer.budget() / 64)
    assert pacer.budget() < 64


def test_a_step_counts_what_its_catch_up_took_and_starts_again_at_zero():
    pacer = CatchUpPacer(max_chunk=512)
    pacer.begin_step(0.1)
    pacer.took(64, 0.02)
    pacer.took(0, 0.5)  # nothing fed: nothing counted
    assert pacer.spent_s == 0.02 and pacer.budget() == 128
    pacer.begin_step(None)
    assert pacer.spent_s == 0.0 and pacer.budget() == 512
