"""At temperature > 0 speculation keeps the target's output distribution: a chi-square test of
the second generated token against its exact distribution, computed from the model directly."""

from __future__ import annotations

import asyncio
import math
from collections import Counter

import mlx.core as mx
import pytest
from mlx_lm import load as mlx_load

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine.api import Engine, EngineConfig
from engine.requests import (
    GenerationRequest,
    SamplingParams,
    SpecMethod,
    SpeculativeParams,
)
from tests.tiny_models import make_tiny_llama_dir

VOCAB = 64
SAMPLES = 500
# repeats, so prompt lookup proposes 54 first: a token the target gives 15%, so a good share
# of the 500 replies keep a draft (chosen by searching the tiny target's first-token odds)
PROMPT = [56, 54, 54, 24, 56, 54, 54, 24, 56, 54]
Z_999 = 3.09  # one-sided normal quantile for p = 0.001


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    target = make_tiny_llama_dir(tmp_path_factory.mktemp("t"), vocab_size=VOCAB, seed=3)
    draft = make_tiny_llama_dir(tmp_path_factory.mktemp("d"), vocab_size=VOCAB, seed=4)
    return target, draft


def exact_second_token(model_dir, eos: set[int]) -> dict:
    """P(outcome) where outcome is ('end1',), ('end2',) or the second token id."""
    model, _ = mlx_load(str(model_dir))
    p1 = mx.softmax(model(mx.array([PROMPT]))[0, -1], axis=-1).tolist()
    seqs = mx.array([PROMPT + [v] for v in range(VOCAB)])
    p2 = mx.softmax(model(seqs)[:, -1, :], axis=-1).tolist()
    dist: Counter = Counter()
    for x1 in range(VOCAB):
        if x1 in eos:
            dist["end1"] += p1[x1]
            continue
        for x2 in range(VOCAB):
            dist["end2" if x2 in eos else x2] += p1[x1] * p2[x1][x2]
    return dist


def outcome(tokens: list[int]):
    return "end1" if not tokens else "end2" if len(tokens) == 1 else tokens[1]


async def sample(model_dir, draft_dir, spec: SpeculativeParams) -> tuple[Counter, int]:
    eng = Engine(
        EngineConfig(model=str(model_dir), draft_model=str(draft_dir), max_batch=32, log_blas=False)
    )
    eng.start()
    await eng.wait_ready()

    async def one(seed: int):
        request = GenerationRequest(
            prompt_tokens=PROMPT,
            max_tokens=2,
            sampling=SamplingParams(temperature=1.0, seed=seed),
            speculative=spec,
        )
        return await eng.generate(request)

    results = await asyncio.gather(*(one(seed) for seed in range(SAMPLES)))
    await eng.stop()
    accepted = sum(r.stats.spec.accepted_tokens for r in results)
    return Counter(outcome(r.token_ids) for r in results), accepted


def chi_square(observed: Counter, expected: dict, n: int) -> tuple[float, int]:
    bins, pooled_obs, pooled_exp = [], 0, 0.0
    for key, p in expected.items():
        if p * n >= 5:
            bins.append((observed.get(key, 0), p * n))
        else:
            pooled_obs += observed.get(key, 0)
            pooled_exp += p * n
    pooled_obs += sum(v for k, v in observed.items() if k not in expected)
    if pooled_exp > 0:
        bins.append((pooled_obs, pooled_exp))
    stat = sum((o - e) ** 2 / e for o, e in bins)
    return stat, len(bins) - 1


def chi2_critical(df: int, z: float = Z_999) -> float:
    """Wilson-Hilferty approximation of the chi-square quantile."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


@pytest.mark.parametrize(
    "spec",
    [
        SpeculativeParams(),
        SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=2, ngram_max=3),
        SpeculativeParams(method=SpecMethod.DRAFT_MODEL, draft_tokens=2),
    ],
    ids=["off", "lookup", "draft"],
)
def test_second_token_follows_target_distribution(model_dirs, spec):
    target, draft = model_dirs
    _, tokenizer = mlx_load(str(target))
    expected = exact_second_token(target, set(tokenizer.eos_token_ids))
    observed, accepted = asyncio.run(sample(target, draft, spec))
    stat, df = chi_square(observed, expected, SAMPLES)
    assert df >= 5, "the test needs a spread-out distribution"
    assert stat < chi2_critical(df), f"chi2={stat:.1f} df={df}: not the target's distribution"
    if spec.method != SpecMethod.OFF:
        assert accepted > 0, "speculation never accepted a draft: the test proves nothing"
