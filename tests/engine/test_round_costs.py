"""What "auto" weighs a verify round against a plain step with (engine/speculative/auto.py): each
decode-only step's whole period, from its start to the next step's start, recorded by batch size
and width; steps that also join, admit or prefill rows, and gaps after the batch ran empty, are
left out (their time is not the round's)."""

from __future__ import annotations

import time

import pytest

from engine.requests import GenerationRequest
from tests.engine.engine_harness import P_A, P_B, make_core, synthetic

pytestmark = pytest.mark.timeout(120)

N = 24


def run(core) -> None:
    for _ in range(400):
        if not core.has_work():
            return
        core.step()
    raise AssertionError("the engine never finished")


def test_plain_steps_and_verify_rounds_are_priced_by_their_whole_period(tiny):
    core = make_core(tiny)
    spec = synthetic(P_A, tiny.greedy(P_A, N), 0.8, 3)
    core.add(GenerationRequest(prompt_tokens=P_A, max_tokens=N, speculative=spec))
    core.add(GenerationRequest(prompt_tokens=P_B, max_tokens=N))
    run(core)
    seconds = core.policy.costs.seconds
    assert any(b == 2 and w > 1 for b, w in seconds), seconds  # rounds of the pair
    assert all(s > 0 for s in seconds.values())
    plain = make_core(tiny)
    plain.add(GenerationRequest(prompt_tokens=P_A, max_tokens=N))
    run(plain)
    assert set(plain.policy.costs.seconds) == {(1, 1)}


def test_an_idle_engine_does_not_charge_its_wait_to_the_last_step(tiny):
    core = make_core(tiny)
    core.add(GenerationRequest(prompt_tokens=P_A, max_tokens=N))
    run(core)
    step = core.policy.costs.seconds[(1, 1)]
    time.sleep(0.3)  # nothing runs; then a new chat arrives
    core.add(GenerationRequest(prompt_tokens=P_B, max_tokens=N))
    run(core)
    assert core.policy.costs.seconds[(1, 1)] < step + 0.3 * 0.3
