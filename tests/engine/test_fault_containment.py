"""Faults stay inside the request that caused them: a drafter, a sampler, a target forward or a
draft model that raises for one row fails that row with its message, while the rows beside it
finish with exactly `mlx_lm.generate`'s tokens; a step that fails where no row can be blamed
ends every request once instead of failing again on every loop. Nothing hangs (every wait has a
timeout)."""

from __future__ import annotations

import asyncio
from typing import Any

import mlx.core as mx
import pytest

from engine.requests import (
    GenerationRequest,
    SamplingParams,
    SpecMethod,
    SpeculativeParams,
)
from engine.sampling import RowSampler
from tests.engine.engine_harness import (
    P_A,
    P_B,
    P_C,
    SYNTH,
    collect,
    make_prompt,
    synthetic,
    with_engine,
)

pytestmark = pytest.mark.timeout(120)

N = 16
LOOKUP = SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=3)
P_BAD = make_prompt(77, 18)


class FaultyModel:
    """The real model, raising while its graph is built when `bad` is among its inputs."""

    def __init__(self, model: Any, bad: int) -> None:
        self._model, self._bad = model, bad

    def __call__(self, x: mx.array, *args: Any, **kwargs: Any) -> mx.array:
        if (x == self._bad).any().item():
            raise RuntimeError(f"injected: the forward saw token {self._bad}")
        return self._model(x, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


async def _patch_target(eng, bad: int) -> None:
    def patch() -> None:
        executor = eng._worker.core_for().executor
        executor.model = executor.batch.model = FaultyModel(executor.model, bad)

    await eng.run_on_engine_thread(patch)


async def _good_rows(eng, tiny) -> list:
    """Three neighbours: plain, prompt lookup and a synthetic drafter."""
    return [
        collect(eng, GenerationRequest(prompt_tokens=P_A, max_tokens=N)),
        collect(eng, GenerationRequest(prompt_tokens=P_B, max_tokens=N, speculative=LOOKUP)),
        collect(
            eng,
            GenerationRequest(
                prompt_tokens=P_C,
                max_tokens=N,
                speculative=synthetic(P_C, tiny.greedy(P_C, N), 0.7, 4),
            ),
        ),
    ]


def _assert_neighbours_exact(tiny, outcomes) -> None:
    for prompt, outcome in zip((P_A, P_B, P_C), outcomes):
        assert outcome.finished.token_ids == tiny.greedy(prompt, N)


@pytest.mark.parametrize("ahead", [False, True], ids=["serial", "rounds-ahead"])
def test_a_forward_that_raises_on_one_rows_token_fails_only_that_row(tiny, ahead):
    """Also with verify rounds queued ahead (engine/core/lookahead.py): the round in flight is
    read back before the rows are probed one by one."""
    bad_reply = tiny.greedy(P_BAD, N)
    others = {t for p in (P_A, P_B, P_C) for t in p + tiny.greedy(p, N)}
    bad = next(t for t in bad_reply[2:] if t not in others and t not in P_BAD)

    async def body(eng):
        await _patch_target(eng, bad)
        rows = await _good_rows(eng, tiny)
        faulty = collect(
            eng, GenerationRequest(prompt_tokens=P_BAD, max_tokens=N, speculative=LOOKUP)
        )
        outcomes = await asyncio.gather(faulty, *rows)
        after = await collect(eng, GenerationRequest(prompt_tokens=P_A, max_tokens=N))
        return outcomes, after

    (faulty, *good), after = with_engine(tiny.path, body, verify_ahead=ahead)
    assert f"injected: the forward saw token {bad}" in faulty.error.message
    assert faulty.error.message.startswith("decoding failed")
    _assert_neighbours_exact(tiny, good)
    assert after.finished.token_ids == tiny.greedy(P_A, N)


def test_a_prompt_that_raises_in_prefill_fails_only_its_request(tiny):
    bad = P_BAD[5]

    async def body(eng):
        await _patch_target(eng, bad)
        rows = await _good_rows(eng, tiny)
        faulty = collect(eng, GenerationRequest(prompt_tokens=P_BAD, max_tokens=N))
        return await asyncio.gather(faulty, *rows)

    faulty, *good = with_engine(tiny.path, body)
    assert faulty.error.message.startswith("prompt processing failed")
    _assert_neighbours_exact(tiny, good)


@pytest.mark.parametrize("ahead", [False, True], ids=["serial", "rounds-ahead"])
def test_a_drafter_that_raises_for_one_row_fails_only_that_row(tiny, monkeypatch, ahead):
    original = SYNTH.propose

    def propose(rows):
        if any(list(r.prompt) == P_BAD for r in rows):
            raise RuntimeError("injected: the drafter cannot draft this row")
        return original(rows)

    monkeypatch.setattr(SYNTH, "propose", propose)

    async def body(eng):
        rows = await _good_rows(eng, tiny)
        spec = synthetic(P_BAD, tiny.greedy(P_BAD, N), 0.9, 4)
        faulty = collect(
            eng, GenerationRequest(prompt_tokens=P_BAD, max_tokens=N, speculative=spec)
        )
        return await asyncio.gather(faulty, *rows)

    faulty, *good = with_engine(tiny.path, body, verify_ahead=ahead)
    assert faulty.error.message == "drafting failed: injected: the drafter cannot draft this row"
    _assert_neighbours_exact(tiny, good)


def test_a_sampler_that_raises_for_one_row_fails_only_that_row(tiny, monkeypatch):
    original = RowSampler.sample

    def sample(self, logprobs, position):
        if self.params.seed == 666:
            raise RuntimeError("injected: this row's sampler fails")
        return original(self, logprobs, position)

    monkeypatch.setattr(RowSampler, "sample", sample)
    seeded = SamplingParams(temperature=0.9, seed=666)

    async def body(eng):
        rows = await _good_rows(eng, tiny)
        faulty = collect(eng, GenerationRequest(prompt_tokens=P_BAD, max_tokens=N, sampling=seeded))
        return await asyncio.gather(faulty, *rows)

    faulty, *good = with_engine(tiny.path, body)
    assert faulty.error.message == "sampling failed: injected: this row's sampler fails"
    _assert_neighbours_exact(tiny, good)


def test_a_draft_model_that_fails_on_one_prompt_fails_only_that_row(tiny):
    """The draft model (here the target itself) raises while it catches up on one prompt; the
    target's caches are untouched by it, so every other row stays exact."""
    bad = P_BAD[3]
    draft = SpeculativeParams(method=SpecMethod.DRAFT_MODEL, draft_tokens=3)

    async def body(eng):
        def patch() -> None:
            drafter = _draft_drafter(eng._worker.core_for().executor)
            drafter.model = FaultyModel(drafter.model, bad)

        await eng.run_on_engine_thread(patch)
        rows = await _good_rows(eng, tiny)
        rows.append(
            collect(eng, GenerationRequest(prompt_tokens=P_A, max_tokens=N, speculative=draft))
        )
        faulty = collect(
            eng, GenerationRequest(prompt_tokens=P_BAD, max_tokens=N, speculative=draft)
        )
        return await asyncio.gather(faulty, *rows)

    faulty, *good = with_engine(tiny.path, body, draft_model=str(tiny.path))
    assert faulty.error.message.startswith("drafting failed: injected")
    _assert_neighbours_exact(tiny, good[:3])
    assert good[3].finished.token_ids == tiny.greedy(P_A, N)
    assert good[3].finished.stats.spec.accepted_tokens > 0  # it did draft, after the fault


def test_a_step_that_fails_for_no_row_ends_every_request_once(tiny):
    async def body(eng):
        calls = {"n": 0}

        def patch() -> None:
            executor = eng._worker.core_for().executor
            real = executor.execute

            def execute(plan, **kwargs):
                if plan.decode:
                    calls["n"] += 1
                    raise RuntimeError("injected: the step itself is broken")
                return real(plan, **kwargs)

            executor.execute = execute

        await eng.run_on_engine_thread(patch)
        failed = await asyncio.gather(
            collect(eng, GenerationRequest(prompt_tokens=P_A, max_tokens=N)),
            collect(eng, GenerationRequest(prompt_tokens=P_B, max_tokens=N)),
        )
        n_calls = calls["n"]

        def unpatch() -> None:
            del eng._worker.core_for().executor.execute

        await eng.run_on_engine_thread(unpatch)
        after = await collect(eng, GenerationRequest(prompt_tokens=P_C, max_tokens=N))
        return failed, n_calls, after

    failed, n_calls, after = with_engine(tiny.path, body)
    for outcome in failed:
        assert outcome.error.message == "engine step failed: injected: the step itself is broken"
    assert n_calls <= 2  # once per batch that formed, never a hot loop
    assert after.finished.token_ids == tiny.greedy(P_C, N)


def _draft_drafter(executor) -> Any:
    """The draft-model drafter in a core (one draft model: the configured one)."""
    (name,) = [n for n in executor.drafters if n.startswith(SpecMethod.DRAFT_MODEL.value + ":")]
    return executor.drafters[name]
