"""Request life cycle through the public Engine API on a tiny random llama: seeded sampling,
max tokens, cancellation, per-request isolation of bad input, bad models and drafts, stats.

The tiny model has untied embeddings: a tied tiny random model only repeats its last input
token, which would make every reply the same token over and over.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass, field

import engine  # noqa: F401  (OpenBLAS before MLX)

# isort: split
import pytest
from mlx_lm import load as mlx_load
from mlx_lm.generate import stream_generate

from engine.api import Engine, EngineConfig
from engine.models import ModelLoadError
from engine.requests import (
    ErrorEvent,
    FinishedEvent,
    FinishReason,
    GenerationRequest,
    SamplingParams,
    SpecMethod,
    SpeculativeParams,
    TokenEvent,
)
from tests.tiny_models import make_tiny_gemma3_dir, make_tiny_llama_dir

VOCAB = 49152
TIMEOUT_S = 60.0  # no test here should come near this; it only turns a hang into a failure
SEEDED = SamplingParams(temperature=0.8, top_p=0.9, seed=123)


def make_prompt(seed: int, length: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(100, VOCAB) for _ in range(length)]  # past the special tokens


P_A = make_prompt(1, 20)
P_B = make_prompt(2, 25)
P_C = make_prompt(3, 12)


@dataclass
class TinyModel:
    path: object
    model: object
    tokenizer: object
    _greedy: dict = field(default_factory=dict)

    def greedy(self, prompt: list[int], max_tokens: int) -> list[int]:
        """mlx_lm.generate's greedy reply (EOS dropped), cached per prompt."""
        key = (tuple(prompt), max_tokens)
        if key not in self._greedy:
            self._greedy[key] = [
                r.token
                for r in stream_generate(self.model, self.tokenizer, prompt, max_tokens=max_tokens)
                if not (r.finish_reason == "stop" and r.token in self.tokenizer.eos_token_ids)
            ]
        return self._greedy[key]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> TinyModel:
    path = make_tiny_llama_dir(tmp_path_factory.mktemp("target"), tie_word_embeddings=False)
    model, tokenizer = mlx_load(str(path))
    return TinyModel(path, model, tokenizer)


@dataclass
class Outcome:
    tokens: list[int] = field(default_factory=list)
    deltas: list[str] = field(default_factory=list)
    from_draft: list[bool] = field(default_factory=list)
    end: FinishedEvent | ErrorEvent | None = None

    @property
    def finished(self) -> FinishedEvent:
        assert isinstance(self.end, FinishedEvent), f"expected a FinishedEvent, got {self.end}"
        return self.end

    @property
    def error(self) -> ErrorEvent:
        assert isinstance(self.end, ErrorEvent), f"expected an ErrorEvent, got {self.end}"
        return self.end


async def collect(eng: Engine, request: GenerationRequest) -> Outcome:
    return await drain(eng.submit(request))


async def drain(stream) -> Outcome:
    out = Outcome()
    async for event in stream:
        assert out.end is None, "an event came after the stream's last one"
        if isinstance(event, TokenEvent):
            out.tokens += event.token_ids
            out.deltas.append(event.text)
            out.from_draft += event.from_draft
        elif isinstance(event, FinishedEvent | ErrorEvent):
            out.end = event
    assert out.end is not None
    if isinstance(out.end, FinishedEvent):
        assert out.end.token_ids == out.tokens
        assert "".join(out.deltas) == out.end.text
    return out


def with_engine(model_dir, body, **config):
    """Run `body(engine)` in a fresh loop with a started, ready engine; stop it afterwards."""

    async def main():
        eng = Engine(EngineConfig(model=str(model_dir), log_blas=False, **config))
        eng.start()
        try:
            await asyncio.wait_for(eng.wait_ready(), TIMEOUT_S)
            return await asyncio.wait_for(body(eng), TIMEOUT_S)
        finally:
            await eng.stop()

    return asyncio.run(main())


async def wait_until(predicate, timeout_s: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.02)
    return predicate()


def synthetic(reference: list[int], acceptance: float, k: int) -> SpeculativeParams:
    return SpeculativeParams(
        method=SpecMethod.SYNTHETIC,
        synthetic_reference=tuple(reference),
        synthetic_acceptance=acceptance,
        draft_tokens=k,
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
                    prompt_tokens=P_B, max_tokens=40, speculative=synthetic(reference, 1.0, 8)
                ),
            ),
        )
        return alone, shared, neighbour

    alone, shared, neighbour = with_engine(tiny.path, body)
    assert neighbour.tokens == reference
    assert shared.tokens == alone.tokens


# -- 2. max tokens ---------------------------------------------------------------------------


def test_max_tokens_plain_and_speculative(tiny):
    greedy = tiny.greedy(P_A, 40)

    async def body(eng):
        plain = await collect(eng, GenerationRequest(prompt_tokens=P_A, max_tokens=7))
        one = await collect(eng, GenerationRequest(prompt_tokens=P_A, max_tokens=1))
        spec = await collect(
            eng,
            GenerationRequest(
                prompt_tokens=P_A, max_tokens=5, speculative=synthetic(greedy, 1.0, 8)
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


# -- 6. isolation of bad requests ------------------------------------------------------------


def test_bad_requests_fail_alone(tiny):
    bad = {
        "oov": (GenerationRequest(prompt_tokens=[5, VOCAB + 7, 9]), ["outside the vocabulary"]),
        "empty": (GenerationRequest(prompt_tokens=[]), ["prompt is empty"]),
        "top_p": (
            GenerationRequest(
                prompt_tokens=P_C, sampling=SamplingParams(temperature=0.7, top_p=0.0)
            ),
            ["top-p", "got 0"],
        ),
        "too long": (
            GenerationRequest(prompt_tokens=make_prompt(9, 100)),
            ["100 tokens", "context holds 64"],
        ),
        "nothing": (GenerationRequest(), ["neither messages nor prompt tokens"]),
        "role": (GenerationRequest(messages=[{"role": "robot", "content": "hi"}]), ["role"]),
        "max tokens": (GenerationRequest(prompt_tokens=P_C, max_tokens=0), ["max tokens"]),
        "k": (
            GenerationRequest(
                prompt_tokens=P_C,
                speculative=SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=99),
            ),
            ["draft tokens"],
        ),
        "no draft": (
            GenerationRequest(
                prompt_tokens=P_C, speculative=SpeculativeParams(method=SpecMethod.DRAFT_MODEL)
            ),
            ["draft model"],
        ),
    }

    async def body(eng):
        good = [
            GenerationRequest(prompt_tokens=P_A, max_tokens=16),
            GenerationRequest(prompt_tokens=P_C, max_tokens=16),
        ]
        requests = [good[0]] + [r for r, _ in bad.values()] + [good[1]]
        outcomes = await asyncio.gather(*(collect(eng, r) for r in requests))
        return outcomes[0], outcomes[-1], dict(zip(bad, outcomes[1:-1])), eng.stats().status

    first, second, errors, status = with_engine(tiny.path, body, max_context=64)
    for name, (_, words) in bad.items():
        message = errors[name].error.message
        for word in words:
            assert word in message, f"{name}: {word!r} not in {message!r}"
    assert first.finished.finish_reason == FinishReason.LENGTH
    assert first.tokens == tiny.greedy(P_A, 16)
    assert second.tokens == tiny.greedy(P_C, 16)
    assert status == "ready"


# -- 7. bad models and drafts ----------------------------------------------------------------


def _load_error(model_path) -> tuple[str, str, str]:
    async def main():
        eng = Engine(EngineConfig(model=str(model_path), log_blas=False))
        eng.start()
        try:
            with pytest.raises(ModelLoadError) as info:
                await asyncio.wait_for(eng.wait_ready(), TIMEOUT_S)
            refused = await collect(eng, GenerationRequest(prompt_tokens=P_C))
            return str(info.value), eng.stats().status, refused.error.message
        finally:
            await eng.stop()

    return asyncio.run(main())


def test_bad_model_folders(tmp_path):
    missing = tmp_path / "nope"
    message, status, refused = _load_error(missing)
    assert str(missing) in message and "does not exist" in message
    assert status == "error"
    assert "no model is loaded" in refused

    empty = tmp_path / "empty"
    empty.mkdir()
    message, _, _ = _load_error(empty)
    assert str(empty) in message and "config.json is missing" in message

    text = tmp_path / "notes"
    text.mkdir()
    (text / "notes.txt").write_text("not a model")
    message, _, _ = _load_error(text)
    assert str(text) in message and "not an MLX model folder" in message

    no_weights = tmp_path / "no-weights"
    no_weights.mkdir()
    (no_weights / "config.json").write_text(json.dumps({"model_type": "llama"}))
    message, _, _ = _load_error(no_weights)
    assert str(no_weights) in message and "no weights" in message


def test_incompatible_drafts_are_refused(tiny, tmp_path):
    small_vocab = make_tiny_llama_dir(tmp_path / "draft-v1000", vocab_size=1000, seed=1)
    sliding = make_tiny_gemma3_dir(tmp_path / "draft-gemma3", sliding_window=8)
    good_draft = make_tiny_llama_dir(tmp_path / "draft-ok", seed=1)

    async def body(eng):
        target = eng.stats().model
        with pytest.raises(ModelLoadError) as vocab_error:
            await eng.load_draft_model(str(small_vocab))
        with pytest.raises(ModelLoadError) as sliding_error:
            await eng.load_draft_model(str(sliding))
        after_refusals = eng.stats().draft_model
        refused = await collect(
            eng,
            GenerationRequest(
                prompt_tokens=P_C, speculative=SpeculativeParams(method=SpecMethod.DRAFT_MODEL)
            ),
        )
        info = await eng.load_draft_model(str(good_draft))
        drafted = await collect(
            eng,
            GenerationRequest(
                prompt_tokens=P_A,
                max_tokens=20,
                speculative=SpeculativeParams(method=SpecMethod.DRAFT_MODEL, draft_tokens=3),
            ),
        )
        return (
            target,
            vocab_error.value,
            sliding_error.value,
            after_refusals,
            refused,
            info,
            drafted,
        )

    target, vocab_error, sliding_error, after, refused, info, drafted = with_engine(tiny.path, body)
    message = str(vocab_error)
    assert "vocabularies" in message and "1000" in message
    assert "draft-v1000" in message and target.name in message
    assert "sliding-window" in str(sliding_error) and "draft-gemma3" in str(sliding_error)
    assert after is None
    assert "draft model" in refused.error.message
    assert info.name == "draft-ok"
    assert drafted.tokens == tiny.greedy(P_A, 20)  # a draft never changes greedy tokens
    assert drafted.finished.stats.spec.rounds > 0


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
                    prompt_tokens=P_B, max_tokens=40, speculative=synthetic(reference, 0.5, 4)
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
