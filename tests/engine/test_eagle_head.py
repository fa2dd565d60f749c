"""The default model's trained draft head (engine/speculative/eagle_drafter.py): at temperature
0 every row of a mixed batch (head rows with k=3 and a late-joining k=1 row, auto, prompt
lookup, plain) equals mlx_lm.generate alone; the head actually drafts and is accepted; a corrupt
head file is refused with a clear message and speculation falls back."""

from __future__ import annotations

import asyncio
import shutil

import pytest

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine.api import Engine, EngineConfig
from engine.bench.baselines import reference_tokens
from engine.bench.workloads import messages_for, prompt_ids
from engine.models import load_model
from engine.requests import GenerationRequest, SpecMethod, SpeculativeParams
from engine.speculative import eagle_drafter
from engine.speculative.eagle_head import EagleHeadError, load_head

MAX_TOKENS = 24
SPECS = [
    SpeculativeParams(method=SpecMethod.DRAFT_MODEL, draft_tokens=3),
    SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=2),
    SpeculativeParams(),
    SpeculativeParams(method=SpecMethod.AUTO),
    SpeculativeParams(method=SpecMethod.DRAFT_MODEL, draft_tokens=1),
]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def default_model():
    return load_model(None)


async def _run(prompts, specs, *, late: int | None = None):
    eng = Engine(EngineConfig(log_blas=False, prompt_cache=False))
    eng.start()
    info = await eng.wait_ready()

    async def one(i, prompt):
        await asyncio.sleep(0.5 if i == late else 0.0)
        req = GenerationRequest(prompt_tokens=prompt, max_tokens=MAX_TOKENS, speculative=specs[i])
        return await eng.generate(req)

    try:
        return info, await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts)))
    finally:
        await eng.stop()


def test_mixed_batch_with_head_rows_equals_generate(default_model):
    tok = default_model.tokenizer
    prompts = [prompt_ids(tok, m) for m in messages_for("chat", 5)]
    expected = [reference_tokens(default_model.model, tok, p, MAX_TOKENS) for p in prompts]
    info, results = asyncio.run(_run(prompts, SPECS, late=4))
    assert [r.token_ids for r in results] == expected
    for i in (0, 4):
        spec = results[i].stats.spec
        assert spec.rounds > 0, "the head never drafted"
    head_row = results[0].stats.spec
    assert head_row.accepted_tokens > 0, "no draft of the head was accepted"


def test_auto_rows_rewriting_and_chatting_beside_head_rows_equal_generate(default_model):
    """auto rows draft a strong prompt-lookup match before the head when there is one (a
    rewrite copies its prompt): every row still equals mlx_lm.generate alone, and the head's
    own rows and the rewrite rows both get drafts accepted."""
    tok = default_model.tokenizer
    messages = messages_for("rewrite", 2) + messages_for("chat", 2)
    prompts = [prompt_ids(tok, m) for m in messages]
    expected = [reference_tokens(default_model.model, tok, p, MAX_TOKENS) for p in prompts]
    auto = SpeculativeParams(method=SpecMethod.AUTO)
    head = SpeculativeParams(method=SpecMethod.DRAFT_MODEL, draft_tokens=3)
    _, results = asyncio.run(_run(prompts, [auto, auto, auto, head]))
    assert [r.token_ids for r in results] == expected
    assert results[0].stats.spec.accepted_tokens > 0
    assert results[3].stats.spec.accepted_tokens > 0


def test_a_corrupt_head_is_refused_with_a_clear_message(tmp_path, monkeypatch):
    src = eagle_drafter.head_path("SmolLM2-135M-Instruct")
    shutil.copy(src, tmp_path / src.name)
    weights = src.with_suffix(".safetensors")
    data = bytearray(weights.read_bytes())
    data[-100] ^= 0xFF
    (tmp_path / weights.name).write_bytes(bytes(data))
    with pytest.raises(EagleHeadError, match="corrupt"):
        load_head(tmp_path / src.name)
    monkeypatch.setattr(eagle_drafter, "head_path", lambda name: tmp_path / src.name)

    async def body():
        eng = Engine(EngineConfig(log_blas=False, prompt_cache=False))
        eng.start()
        info = await eng.wait_ready()
        try:
            auto = GenerationRequest(
                prompt_tokens=[1, 2, 3], max_tokens=4, speculative=SpeculativeParams(method="auto")
            )
            result = await eng.generate(auto)  # auto falls back to prompt lookup
            draft = GenerationRequest(
                prompt_tokens=[1, 2, 3], max_tokens=4, speculative=SpeculativeParams(method="draft")
            )
            with pytest.raises(Exception, match="draft head"):
                await eng.generate(draft)
            return info, result
        finally:
            await eng.stop()

    info, result = asyncio.run(body())
    assert info.draft_head is None and "corrupt" in (info.draft_head_note or "")
    assert len(result.token_ids) == 4


def test_head_next_turn_from_the_prompt_cache_equals_generate(default_model, tmp_path):
    tok = default_model.tokenizer
    messages = messages_for("chat", 3)[2]
    first = prompt_ids(tok, messages)
    reply = reference_tokens(default_model.model, tok, first, MAX_TOKENS)
    second = first + reply + prompt_ids(tok, [{"role": "user", "content": "Say it again."}])
    expected = reference_tokens(default_model.model, tok, second, MAX_TOKENS)
    spec = SpeculativeParams(method=SpecMethod.DRAFT_MODEL, draft_tokens=3)

    async def body():
        config = EngineConfig(log_blas=False, prompt_cache=True, prompt_cache_dir=str(tmp_path))
        eng = Engine(config)
        eng.start()
        await eng.wait_ready()
        try:
            await eng.generate(
                GenerationRequest(prompt_tokens=first, max_tokens=MAX_TOKENS, speculative=spec)
            )
            return await eng.generate(
                GenerationRequest(prompt_tokens=second, max_tokens=MAX_TOKENS, speculative=spec)
            )
        finally:
            await eng.stop()

    result = asyncio.run(body())
    assert result.token_ids == expected
    assert result.stats.cached_tokens > 0 and result.stats.spec.rounds > 0
