"""Hybrid models (recurrent state beside attention: Qwen3-Next, the Qwen3.5 family's shape) in
the batch: every speculative method exact against mlx_lm.generate alone, rows whose drafts are
rejected going back to their state from before the round; batched prefill without a fallback."""

from __future__ import annotations

import asyncio
import logging

import pytest

from engine.requests import SpecMethod, SpeculativeParams
from tests.engine.engine_harness import synthetic
from tests.engine.test_exactness import make_prompts, reference_tokens, run_engine
from tests.tiny_models import make_tiny_qwen3_next_dir

N = 24


@pytest.fixture(scope="module")
def qwen3_next(tmp_path_factory):
    return make_tiny_qwen3_next_dir(tmp_path_factory.mktemp("qwen3_next"))


@pytest.mark.parametrize("concurrency", [1, 4])
def test_hybrid_plain_batch_equals_generate(qwen3_next, concurrency, caplog):
    prompts = make_prompts(concurrency, vocab=49152, seed=30 + concurrency, min_len=3, max_len=40)
    expected = reference_tokens(qwen3_next, prompts, max_tokens=N)
    with caplog.at_level(logging.WARNING):
        got = asyncio.run(run_engine(qwen3_next, prompts, N, stagger=False))
    assert got == expected
    assert "batched prefill failed" not in caplog.text


@pytest.mark.parametrize("acceptance", [0.5, 0.9])
def test_hybrid_speculative_rows_equal_generate(qwen3_next, acceptance):
    prompts = make_prompts(4, vocab=49152, seed=40, min_len=3, max_len=30)
    expected = reference_tokens(qwen3_next, prompts, max_tokens=N)
    specs = [
        synthetic(prompts[0], expected[0], acceptance, 4),
        SpeculativeParams(),
        synthetic(prompts[2], expected[2], acceptance, 2),
        SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=3),
    ]
    got = asyncio.run(run_engine(qwen3_next, prompts, N, stagger=True, specs=specs))
    assert got == expected


def test_hybrid_prompt_cache_serves_the_next_turn_and_a_regenerated_reply(qwen3_next):
    """Recurrent state cannot be trimmed, so it is stored where later turns ask for it: at the
    end of the prompt (a regenerated reply) and at the end of the reply (the next turn)."""
    from engine.requests import GenerationRequest
    from tests.engine.engine_harness import make_prompt, with_engine

    prompt = make_prompt(60, 20)
    first_ref = reference_tokens(qwen3_next, [prompt], max_tokens=12)[0]

    async def body(eng):
        first = await eng.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=12))
        again = await eng.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=12))
        follow = prompt + first.token_ids + make_prompt(61, 5)
        second = await eng.generate(GenerationRequest(prompt_tokens=follow, max_tokens=12))
        return first, again, follow, second

    first, again, follow, second = with_engine(qwen3_next, body)
    assert first.token_ids == first_ref and first.stats.cached_tokens == 0
    assert again.token_ids == first_ref
    assert again.stats.cached_tokens == len(prompt) - 1  # the prompt's own snapshot
    assert second.token_ids == reference_tokens(qwen3_next, [follow], max_tokens=12)[0]
    assert second.stats.cached_tokens == len(prompt) + len(first.token_ids)


def test_a_model_whose_cache_cannot_roll_back_refuses_speculation_by_name(qwen3_next):
    """A cache kind the engine cannot roll back per row: speculating requests are refused at
    once, naming the model and the method; plain ones run."""
    import asyncio

    from engine.api import Engine, EngineConfig
    from engine.core import batch_check
    from engine.requests import GenerationRequest

    async def main():
        eng = Engine(EngineConfig(model=str(qwen3_next), prompt_cache=False, log_blas=False))
        eng.start()
        info = await eng.wait_ready()
        try:
            lookup = SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP)
            with pytest.raises(RuntimeError) as refused:
                await eng.generate(
                    GenerationRequest(prompt_tokens=[5, 6, 7], max_tokens=4, speculative=lookup)
                )
            plain = await eng.generate(GenerationRequest(prompt_tokens=[5, 6, 7], max_tokens=4))
            return info, str(refused.value), plain
        finally:
            await eng.stop()

    original = batch_check.ROLLS_BACK
    batch_check.ROLLS_BACK = ("KVCache",)  # pretend ArraysCache could not go back
    try:
        info, message, plain = asyncio.run(main())
    finally:
        batch_check.ROLLS_BACK = original
    assert "cannot speculate" in info.speculation_note and "ArraysCache" in info.speculation_note
    assert message.startswith("speculative method 'lookup' refused:")
    assert qwen3_next.name in message
    assert len(plain.token_ids) == 4
