"""The real default model (SmolLM2-135M-Instruct): every row of a batch, with speculation on or
off, produces exactly mlx_lm.generate's tokens for that prompt alone (temperature 0)."""

from __future__ import annotations

import asyncio

import pytest

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine.api import Engine, EngineConfig
from engine.bench.baselines import reference_tokens
from engine.bench.workloads import messages_for, prompt_ids
from engine.models import load_model
from engine.requests import GenerationRequest, SpecMethod, SpeculativeParams

MAX_TOKENS = 24
SPECS = [
    SpeculativeParams(),
    SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=4),
    SpeculativeParams(method=SpecMethod.AUTO, draft_tokens=6),
    SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=2, ngram_max=2),
]


@pytest.fixture(scope="module")
def default_model():
    return load_model(None)


@pytest.fixture(scope="module")
def prompts(default_model):
    tok = default_model.tokenizer
    chat = [prompt_ids(tok, m) for m in messages_for("chat", 4)]
    rewrite = [prompt_ids(tok, m) for m in messages_for("rewrite", 4)]
    mixed = [p for pair in zip(chat, rewrite) for p in pair]
    return mixed


@pytest.fixture(scope="module")
def expected(default_model, prompts):
    return [
        reference_tokens(default_model.model, default_model.tokenizer, p, MAX_TOKENS)
        for p in prompts
    ]


async def run(prompts, specs):
    # the prefix cache is off: a hit changes how the prompt is split into forwards (tested apart)
    eng = Engine(EngineConfig(log_blas=False, prompt_cache=False))
    eng.start()
    await eng.wait_ready()

    async def one(i, prompt):
        await asyncio.sleep(0.05 * i)  # staggered arrival
        req = GenerationRequest(prompt_tokens=prompt, max_tokens=MAX_TOKENS, speculative=specs[i])
        return await eng.generate(req)

    results = await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts)))
    await eng.stop()
    return results


@pytest.mark.parametrize("concurrency", [1, 4, 8])
@pytest.mark.parametrize("speculative", [False, True], ids=["plain", "speculative"])
def test_default_model_rows_equal_generate(prompts, expected, concurrency, speculative):
    specs = [SPECS[i % len(SPECS)] if speculative else SpeculativeParams() for i in range(8)]
    results = asyncio.run(run(prompts[:concurrency], specs))
    assert [r.token_ids for r in results] == expected[:concurrency]
    if speculative and concurrency > 1:
        assert sum(r.stats.spec.rounds for r in results) > 0
