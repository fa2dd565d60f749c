"""A repetition penalty (the only sampling option that reads the reply so far) gives exactly
mlx_lm.generate's greedy tokens with mlx-lm's own repetition processor, in a batch, with rows
speculating (each verify position penalised against the tokens before it)."""

from __future__ import annotations

import asyncio

from mlx_lm.generate import stream_generate
from mlx_lm.sample_utils import make_logits_processors

from engine.requests import GenerationRequest, SamplingParams, SpecMethod, SpeculativeParams
from tests.engine.engine_harness import P_A, P_B, P_C, collect, with_engine

N = 24
PENALTY = SamplingParams(temperature=0.0, repetition_penalty=1.5, repetition_context=12)


def _generate(tiny, prompt: list[int]) -> list[int]:
    processors = make_logits_processors(repetition_penalty=1.5, repetition_context_size=12)
    return [
        r.token
        for r in stream_generate(
            tiny.model, tiny.tokenizer, prompt, max_tokens=N, logits_processors=processors
        )
        if not (r.finish_reason == "stop" and r.token in tiny.tokenizer.eos_token_ids)
    ]


def test_repetition_penalty_matches_generate_in_a_speculating_batch(tiny):
    specs = [
        SpeculativeParams(),
        SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=3),
        SpeculativeParams(method=SpecMethod.AUTO),
    ]
    prompts = [P_A, P_B, P_C + P_C]  # the last repeats itself: lookup finds drafts

    async def body(eng):
        requests = [
            GenerationRequest(prompt_tokens=p, max_tokens=N, sampling=PENALTY, speculative=s)
            for p, s in zip(prompts, specs)
        ]
        return await asyncio.gather(*(collect(eng, r) for r in requests))

    outcomes = with_engine(tiny.path, body)
    assert [o.tokens for o in outcomes] == [_generate(tiny, p) for p in prompts]
    unpenalised = [tiny.greedy(p, N) for p in prompts]
    assert [o.tokens for o in outcomes] != unpenalised  # the penalty did act
