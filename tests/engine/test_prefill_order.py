"""A step's prompt tokens go to the prompts with the fewest left first: a chat's next message
that arrives while a long prompt is being processed is not held behind all of it (on the 2-core
CPU a 2,048-token prompt held it 54 s), and the long prompt still finishes. Prompts that share a
step's padded forward are of like width and like depth. Every reply stays exactly
mlx_lm.generate's."""

from __future__ import annotations

import pytest

from engine.core.scheduler import DEFAULT_PREFILL_WIDTH_FLOOR, DEFAULT_PREFILL_WIDTH_SPREAD
from engine.requests import ErrorEvent, GenerationRequest, TokenEvent
from tests.engine.engine_harness import P_A, P_B, P_C, make_core, make_prompt

pytestmark = pytest.mark.timeout(120)

LONG = make_prompt(21, 300)


def _run(core, requests: dict[str, GenerationRequest], tokens: dict[str, list[int]]) -> None:
    for event in core.step():
        assert not isinstance(event, ErrorEvent), event
        if isinstance(event, TokenEvent):
            tokens.setdefault(event.request_id, []).extend(event.token_ids)


@pytest.mark.parametrize("decoding", [True, False])
def test_a_short_prompt_is_not_held_behind_a_long_one(tiny, decoding):
    core = make_core(tiny, prefill_chunk=32)
    core.scheduler.pacer.gap_factor = None  # whole 32-token chunks: the order is what is tested
    tokens: dict[str, list[int]] = {}
    requests: dict[str, GenerationRequest] = {}
    if decoding:
        chat = GenerationRequest(prompt_tokens=P_A, max_tokens=60)
        requests[chat.request_id] = chat
        core.add(chat)
        while len(core.executor.batch) == 0:
            _run(core, requests, tokens)
    long = GenerationRequest(prompt_tokens=LONG, max_tokens=6)
    core.add(long)
    for _ in range(4):  # the long prompt is under way
        _run(core, requests, tokens)
    together: list[set[str]] = []
    schedule = core.scheduler.schedule

    def recording():
        plan = schedule()
        together.append({c.state.request_id for c in plan.prefill})
        return plan

    core.scheduler.schedule = recording
    (state,) = [s for s in core.scheduler.prefilling if s.request_id == long.request_id]
    assert 0 < state.prefilled < len(LONG) - 1
    short = GenerationRequest(prompt_tokens=P_B, max_tokens=6)
    core.add(short)
    steps = 0
    while short.request_id not in tokens:
        _run(core, requests, tokens)
        steps += 1
    assert steps <= 5, "the short prompt's reply began within a few steps"
    assert long.request_id not in tokens, "the long prompt was still being processed"
    # nor did they share a padded forward: the long prompt's cache is far deeper than the short's
    assert not any({short.request_id, long.request_id} <= ids for ids in together), together
    while core.has_work():
        _run(core, requests, tokens)
    assert tokens[short.request_id] == tiny.greedy(P_B, 6)
    assert tokens[long.request_id] == tiny.greedy(LONG, 6)
    if decoding:
        assert tokens[chat.request_id] == tiny.greedy(P_A, 60)


def test_prompts_in_one_step_are_of_like_width_and_all_finish(tiny):
    """Several prompts share a padded forward: none beside the shortest is much wider."""
    core = make_core(tiny, prefill_chunk=512)
    widths: list[list[int]] = []
    schedule = core.scheduler.schedule

    def recording():
        plan = schedule()
        if len(plan.prefill) > 1:
            widths.append([c.tokens + c.pad for c in plan.prefill])
        return plan

    core.scheduler.schedule = recording
    prompts = [LONG, P_A, P_C, P_B, make_prompt(22, 90)]
    requests = [GenerationRequest(prompt_tokens=p, max_tokens=5) for p in prompts]
    for request in requests:
        core.add(request)
    tokens: dict[str, list[int]] = {}
    while core.has_work():
        _run(core, {}, tokens)
    assert widths, "the short prompts went together"
    for step in widths:
        cap = max(DEFAULT_PREFILL_WIDTH_SPREAD * min(step), DEFAULT_PREFILL_WIDTH_FLOOR)
        assert max(step) <= cap, widths
    for request, prompt in zip(requests, prompts):
        assert tokens[request.request_id] == tiny.greedy(prompt, 5)
