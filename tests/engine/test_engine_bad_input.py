"""Bad input through the public Engine API: requests that cannot run fail alone with a clear
message while good ones in the same batch finish exactly; bad model folders and drafts."""

from __future__ import annotations

import asyncio
import json

import pytest

from engine.api import Engine, EngineConfig
from engine.models import ModelLoadError
from engine.requests import (
    FinishReason,
    GenerationRequest,
    SamplingParams,
    SpecMethod,
    SpeculativeParams,
)
from tests.engine.engine_harness import (
    P_A,
    P_C,
    TIMEOUT_S,
    VOCAB,
    collect,
    make_prompt,
    with_engine,
)
from tests.tiny_models import make_tiny_llama_dir

# -- 6. isolation of bad requests ------------------------------------------------------------


def test_bad_requests_fail_alone(tiny):
    bad = {
        "oov": (
            GenerationRequest(prompt_tokens=[5, VOCAB + 7, 9]),
            ["prompt_tokens[1]", "outside the vocabulary"],
        ),
        "empty": (GenerationRequest(prompt_tokens=[]), ["prompt_tokens is empty"]),
        "top_p": (
            GenerationRequest(
                prompt_tokens=P_C, sampling=SamplingParams(temperature=0.7, top_p=0.0)
            ),
            ["sampling.top_p", "got 0"],
        ),
        "too long": (
            GenerationRequest(prompt_tokens=make_prompt(9, 100)),
            ["100 tokens", "context holds 64"],
        ),
        "nothing": (GenerationRequest(), ["neither messages nor prompt_tokens"]),
        "role": (
            GenerationRequest(messages=[{"role": "robot", "content": "hi"}]),
            ["messages[0].role", "'robot'"],
        ),
        "max tokens": (GenerationRequest(prompt_tokens=P_C, max_tokens=0), ["max_tokens"]),
        "k": (
            GenerationRequest(
                prompt_tokens=P_C,
                speculative=SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=99),
            ),
            ["speculative.draft_tokens", "got 99"],
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
    assert str(missing) in refused and "does not exist" in refused  # tried again, same reason

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


def test_incompatible_drafts_are_refused_naming_both_models(tiny, tmp_path):
    """A request's own draft model is checked against its target when it is admitted; a bad
    one fails that request with both names, a good one drafts from the same chat's next
    request on, and a request for "draft" without any draft model says so."""
    small_vocab = make_tiny_llama_dir(tmp_path / "draft-v1000", vocab_size=1000, seed=1)
    good_draft = make_tiny_llama_dir(tmp_path / "draft-ok", seed=1)

    def draft(path=None, k=4) -> SpeculativeParams:
        return SpeculativeParams(
            method=SpecMethod.DRAFT_MODEL, draft_tokens=k, draft_model=str(path) if path else None
        )

    async def body(eng):
        refused = await collect(
            eng, GenerationRequest(prompt_tokens=P_C, speculative=draft(small_vocab))
        )
        none = await collect(eng, GenerationRequest(prompt_tokens=P_C, speculative=draft()))
        drafted = await collect(
            eng,
            GenerationRequest(prompt_tokens=P_A, max_tokens=20, speculative=draft(good_draft, 3)),
        )
        return eng.stats().model, refused, none, drafted

    target, refused, none, drafted = with_engine(tiny.path, body)
    message = refused.error.message
    assert "vocabularies" in message and "1000" in message
    assert "draft-v1000" in message and target.name in message
    assert "draft model" in none.error.message
    assert drafted.tokens == tiny.greedy(P_A, 20)  # a draft never changes greedy tokens
    assert drafted.finished.stats.spec.rounds > 0
