"""Request life cycle through the public Engine API on a tiny random llama: seeded sampling,
max tokens, cancellation and stats (bad input and bad models: test_engine_bad_input.py).

The tiny model has untied embeddings: a tied tiny random model only repeats its last input
token, which would make every reply the same token over and over.
"""

from __future__ import annotations

import asyncio

import pytest

from engine.requests import (
    ErrorEvent,
    FinishedEvent,
    FinishReason,
    GenerationRequest,
    SamplingParams,
    TokenEvent,
)
from tests.engine.engine_harness import (
    P_A,
    P_B,
    P_C,
    SEEDED,
    VOCAB,
    Outcome,
    collect,
    drain,
    synthetic,
    wait_until,
    with_engine,
)

# -- 1. seeded sampling ----------------------------------------------------------------------


def test_seeded_sampling_is_reproducible_alone_and_in_a_batch(tiny):
    def seeded(seed=123, prompt=P_A):
        params = SamplingParams(temperature=0.8, top_p=0.9, seed=seed)
        return GenerationRequest(prompt_tokens=prompt, max_tokens=24, sampling=params)

    async def body(eng):
        first = await collect(eng, seeded())
        second = await collect(eng, seeded())
        shared = await asyncio.gather(
            collect(eng, GenerationRequest(prompt_tokens=P_B, max_tokens=30)),
            collect(eng, seeded()),
            collect(eng, seeded(seed=7, prompt=P_C)),
        )
        other_seed = await collect(eng, seeded(seed=124))
        return first, second, shared, other_seed

    first, second, (greedy_b, batched, _), other_seed = with_engine(tiny.path, body)
    assert len(first.tokens) == 24
    assert first.tokens == second.tokens
    assert batched.tokens == first.tokens  # whatever else shares the batch
    assert greedy_b.tokens == tiny.greedy(P_B, 30)
    assert first.tokens != tiny.greedy(P_A, 24)  # it really sampled
    assert other_seed.tokens != first.tokens  # 24 draws from ~vocab-wide choices


def test_seeded_sampling_unchanged_by_a_speculating_neighbour(tiny):
    reference = tiny.greedy(P_B, 40)

    async def body(eng):
        alone = await collect(
            eng, GenerationRequest(prompt_tokens=P_A, max_tokens=24, sampling=SEEDED)
        )
        shared, neighbour = await asyncio.gather(
            collect(eng, GenerationRequest(prompt_tokens=P_A, max_tokens=24, sampling=SEEDED)),
            collect(
                eng,
                GenerationRequest(
                    prompt_tokens=P_B, max_tokens=40, speculative=synthetic(P_B, reference, 1.0, 8)
                ),
            ),
        )
        return alone, shared, neighbour

    alone, shared, neighbour = with_engine(tiny.path, body)
    assert neighbour.tokens == reference
    assert shared.tokens == alone.tokens


def test_seeded_sampling_is_the_same_with_speculation_on(tiny):
    # At temperature > 0 a draft token is kept only when it equals the target's own sample at
    # that position, drawn with the same per-position key as a plain step would use: so a
    # seeded reply does not depend on speculation (rejection sampling would only keep its
    # distribution). The synthetic drafter proposes the reply itself, so most drafts are kept.
    async def body(eng):
        plain = await collect(
            eng, GenerationRequest(prompt_tokens=P_A, max_tokens=24, sampling=SEEDED)
        )
        spec = await collect(
            eng,
            GenerationRequest(
                prompt_tokens=P_A,
                max_tokens=24,
                sampling=SEEDED,
                speculative=synthetic(P_A, plain.tokens, 0.8, 4),
            ),
        )
        return plain, spec

    plain, spec = with_engine(tiny.path, body)
    assert spec.tokens == plain.tokens
    s = spec.finished.stats.spec
    assert s.rounds > 0 and s.accepted_tokens > s.rounds  # long runs were kept


# -- 2. max tokens ---------------------------------------------------------------------------


def test_max_tokens_plain_and_speculative(tiny):
    greedy = tiny.greedy(P_A, 40)

    async def body(eng):
        plain = await collect(eng, GenerationRequest(prompt_tokens=P_A, max_tokens=7))
        one = await collect(eng, GenerationRequest(prompt_tokens=P_A, max_tokens=1))
        spec = await collect(
            eng,
            GenerationRequest(
                prompt_tokens=P_A, max_tokens=5, speculative=synthetic(P_A, greedy, 1.0, 8)
            ),
        )
        return plain, one, spec

    plain, one, spec = with_engine(tiny.path, body)
    assert plain.finished.finish_reason == FinishReason.LENGTH
    assert plain.tokens == greedy[:7]
    assert one.finished.finish_reason == FinishReason.LENGTH and one.tokens == greedy[:1]
    assert spec.finished.finish_reason == FinishReason.LENGTH
    assert spec.tokens == greedy[:5]
    # the draft was cut to the 4 tokens that fit; the target's own token ends the reply
    assert spec.from_draft == [True] * 4 + [False]
    assert spec.finished.stats.spec.draft_tokens == 4
    assert spec.finished.stats.generated_tokens == 5


def test_max_tokens_capped_by_the_context(tiny):
    async def body(eng):
        return await collect(eng, GenerationRequest(prompt_tokens=P_A, max_tokens=500))

    out = with_engine(tiny.path, body, max_context=30)
    assert out.finished.finish_reason == FinishReason.LENGTH
    assert out.tokens == tiny.greedy(P_A, 10)  # 30 - 20 prompt tokens


# -- 5. cancellation -------------------------------------------------------------------------


def test_cancel_one_request_while_another_keeps_running(tiny):
    order: list[str] = []

    async def long_then_cancel(eng, request):
        out = Outcome()
        async for event in eng.submit(request):
            if isinstance(event, TokenEvent):
                out.tokens += event.token_ids
                if len(out.tokens) >= 3 and not order:
                    order.append("cancel")
                    eng.cancel(request.request_id)
            elif isinstance(event, FinishedEvent | ErrorEvent):
                out.end = event
        order.append("long ended")
        return out

    async def other(eng, request):
        out = await collect(eng, request)
        order.append("other ended")
        return out

    async def body(eng):
        long_req = GenerationRequest(prompt_tokens=P_A, max_tokens=2000)
        other_req = GenerationRequest(prompt_tokens=P_B, max_tokens=60)
        cancelled, finished = await asyncio.gather(
            long_then_cancel(eng, long_req), other(eng, other_req)
        )
        after = await collect(eng, GenerationRequest(prompt_tokens=P_C, max_tokens=8))
        running = await wait_until(lambda: eng.stats().running == 0)
        return cancelled, finished, after, running

    cancelled, finished, after, idle = with_engine(tiny.path, body)
    assert order == ["cancel", "long ended", "other ended"]
    assert cancelled.finished.finish_reason == FinishReason.CANCELLED
    assert 3 <= len(cancelled.tokens) < 100
    assert cancelled.finished.token_ids == cancelled.tokens
    assert cancelled.tokens == tiny.greedy(P_A, len(cancelled.tokens))
    assert finished.finished.finish_reason == FinishReason.LENGTH
    assert finished.tokens == tiny.greedy(P_B, 60)
    assert after.tokens == tiny.greedy(P_C, 8)
    assert idle


def test_cancel_a_waiting_request(tiny):
    async def body(eng):
        first = GenerationRequest(prompt_tokens=P_A, max_tokens=2000)
        queued = GenerationRequest(prompt_tokens=P_B, max_tokens=2000)
        first_stream = eng.submit(first)
        queued_stream = eng.submit(queued)
        with pytest.raises(ValueError, match="already running"):
            eng.submit(first)
        async for event in first_stream:
            if isinstance(event, TokenEvent):
                break  # the queued request cannot start: max_batch is 1
        queued_waits = await wait_until(
            lambda: eng.stats().running == 1 and eng.stats().waiting == 1
        )
        eng.cancel(queued.request_id)  # still waiting: cancelled before `first` leaves
        await first_stream.aclose()
        return await drain(queued_stream), queued_waits

    out, queued_waits = with_engine(tiny.path, body, max_batch=1)
    assert queued_waits
    assert out.finished.finish_reason == FinishReason.CANCELLED
    assert out.tokens == [] and out.finished.text == ""
    assert out.finished.stats.generated_tokens == 0


def test_closing_the_stream_early_cancels(tiny):
    async def body(eng):
        seen_running = False
        async for event in eng.submit(GenerationRequest(prompt_tokens=P_A, max_tokens=2000)):
            seen_running = seen_running or eng.stats().running >= 1
            if isinstance(event, TokenEvent) and seen_running:
                break
        # the abandoned async generator is closed by the loop, which cancels the request
        idle = await wait_until(lambda: eng.stats().running == 0 and eng.stats().waiting == 0)
        tokens_then = eng.stats().generated_tokens
        await asyncio.sleep(0.3)
        still = eng.stats().generated_tokens == tokens_then
        after = await collect(eng, GenerationRequest(prompt_tokens=P_C, max_tokens=8))
        return seen_running, idle, still, after

    seen_running, idle, still, after = with_engine(tiny.path, body)
    assert seen_running
    assert idle, "the request kept running after its stream was closed"
    assert still
    assert after.tokens == tiny.greedy(P_C, 8)


# -- 9. stats --------------------------------------------------------------------------------


def test_request_and_engine_stats(tiny):
    reference = tiny.greedy(P_B, 40)

    async def body(eng):
        running_seen = []

        async def watch(request):
            out = Outcome()
            async for event in eng.submit(request):
                if isinstance(event, TokenEvent):
                    out.tokens += event.token_ids
                    out.from_draft += event.from_draft
                    running_seen.append(eng.stats().running)
                elif isinstance(event, FinishedEvent | ErrorEvent):
                    out.end = event
            return out

        plain, spec = await asyncio.gather(
            watch(GenerationRequest(prompt_tokens=P_A, max_tokens=120)),
            watch(
                GenerationRequest(
                    prompt_tokens=P_B, max_tokens=40, speculative=synthetic(P_B, reference, 0.5, 4)
                )
            ),
        )
        idle = await wait_until(lambda: eng.stats().running == 0)
        return plain, spec, running_seen, idle, eng.stats()

    plain, spec, running_seen, idle, engine_stats = with_engine(tiny.path, body)

    stats = plain.finished.stats
    assert stats.prompt_tokens == len(P_A)
    assert stats.generated_tokens == len(plain.tokens) == 120
    assert stats.ttft_s is not None and stats.ttft_s > 0
    assert stats.decode_tokens_per_s > 0
    assert stats.elapsed_s >= stats.ttft_s
    assert stats.finish_reason == FinishReason.LENGTH

    assert spec.tokens == reference  # corrupted drafts never change greedy tokens
    s = spec.finished.stats.spec
    assert spec.finished.stats.prompt_tokens == len(P_B)
    assert spec.finished.stats.generated_tokens == 40
    assert s.rounds > 0
    assert 0 < s.accepted_tokens <= s.draft_tokens
    assert sum(s.accepted_by_position) == s.accepted_tokens
    assert sum(s.drafted_by_position) == s.draft_tokens
    assert all(a >= b for a, b in zip(s.accepted_by_position, s.accepted_by_position[1:]))
    assert all(a <= d for a, d in zip(s.accepted_by_position, s.drafted_by_position))
    assert len(s.drafted_by_position) <= 4
    assert s.emitted_tokens >= s.target_forwards and s.tokens_per_forward >= 1
    assert s.emitted_tokens == 40
    assert s.mean_acceptance_length == pytest.approx(1 + s.accepted_tokens / s.rounds)
    assert sum(spec.from_draft) == s.accepted_tokens

    assert max(running_seen) >= 1
    assert idle
    assert engine_stats.running == 0 and engine_stats.waiting == 0
    assert engine_stats.status == "ready" and engine_stats.model.vocab_size == VOCAB
    assert engine_stats.generated_tokens >= 160
    assert engine_stats.spec.rounds >= s.rounds
    assert engine_stats.spec.accepted_tokens >= s.accepted_tokens
