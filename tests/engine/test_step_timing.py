"""Where a verify round's forward time goes (engine/core/step_timing.py): building and queueing
it (host work) and waiting for its results (device time the host did not cover), in rounds run
in series and in rounds queued ahead, each part within the forward's whole time."""

from __future__ import annotations

import pytest

from engine.requests import GenerationRequest
from tests.engine.engine_harness import P_A, P_B, make_core, synthetic

pytestmark = pytest.mark.timeout(120)

N = 24


@pytest.mark.parametrize("ahead", [False, True])
def test_a_verify_forward_is_split_into_its_launch_and_its_wait(tiny, ahead):
    core = make_core(tiny, verify_ahead=ahead)
    for prompt in (P_A, P_B):
        spec = synthetic(prompt, tiny.greedy(prompt, N), 0.8, 3)
        core.add(GenerationRequest(prompt_tokens=prompt, max_tokens=N, speculative=spec))
    for _ in range(400):
        if not core.has_work():
            break
        core.step()
    timing = core.scheduler.timing
    assert timing.verify_rounds > 2
    assert timing.verify_launch_s > 0 and timing.verify_wait_s > 0
    assert timing.verify_launch_s + timing.verify_wait_s <= timing.forward_s + 1e-9
    per_round = timing.per_round_ms()
    assert per_round["verify_launch"] > 0 and per_round["verify_wait"] >= 0
    assert per_round["verify_launch"] + per_round["verify_wait"] <= per_round["forward"] + 0.002
