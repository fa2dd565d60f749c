"""On CUDA a prompt processed beside decoding rows goes in power-of-two chunks (each new forward
length costs a graph build there: engine/core/prefill_pacer.py), its tail padded with filler up
to one; the replies stay exactly mlx_lm.generate's."""

from __future__ import annotations

import pytest

from engine.core import scheduler as scheduler_module
from engine.requests import ErrorEvent, GenerationRequest, TokenEvent
from tests.engine.engine_harness import P_A, make_core, make_prompt

pytestmark = pytest.mark.timeout(120)

LONG = make_prompt(11, 150)


@pytest.mark.parametrize("cuda", [True, False])
def test_chunks_beside_decoding_rows(tiny, monkeypatch, cuda):
    monkeypatch.setattr(scheduler_module, "on_cuda", lambda: cuda)
    core = make_core(tiny, prefill_chunk=512)
    core.scheduler.pacer.chunk = 100  # as if the pacer had settled there
    sizes: list[int] = []
    shapes: list[int] = []  # with the filler of a padded tail
    schedule = core.scheduler.schedule

    def recording():
        plan = schedule()
        if plan.decode:
            sizes.extend(c.tokens for c in plan.prefill)
            shapes.extend(c.tokens + c.pad for c in plan.prefill)
        return plan

    core.scheduler.schedule = recording
    tokens: dict[str, list[int]] = {}
    first = GenerationRequest(prompt_tokens=P_A, max_tokens=40)
    core.add(first)
    while len(core.executor.batch) == 0:
        core.step()
    second = GenerationRequest(prompt_tokens=LONG, max_tokens=8)
    core.add(second)
    while core.has_work():
        for event in core.step():
            assert not isinstance(event, ErrorEvent), event
            if isinstance(event, TokenEvent):
                tokens.setdefault(event.request_id, []).extend(event.token_ids)
    assert sum(sizes) == len(LONG) - 1  # every prompt token but the first input
    assert sizes[0] == (64 if cuda else 100)  # the pacer's 100, as a power of two on CUDA
    if cuda:
        assert all(n & (n - 1) == 0 for n in shapes), shapes
        fillers = [shape - size for shape, size in zip(shapes, sizes)]
        assert not any(fillers[:-1]), fillers  # only the prompt's tail is padded
    else:
        assert shapes == sizes
    assert tokens[first.request_id] == tiny.greedy(P_A, 40)
    assert tokens[second.request_id] == tiny.greedy(LONG, 8)
