"""At temperature 0 every row of a batch produces exactly the tokens mlx_lm.generate produces
for that prompt alone: 1, 4 and 8 concurrent requests, different prompt lengths, staggered
arrival, on a tiny llama, a tiny sliding-window (Gemma 3 shaped) model and the real default model.
"""

from __future__ import annotations

import asyncio
import random

import pytest
from mlx_lm import load as mlx_load
from mlx_lm.generate import stream_generate

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine.api import Engine, EngineConfig
from engine.requests import (
    ErrorEvent,
    FinishedEvent,
    GenerationRequest,
    SpecMethod,
    SpeculativeParams,
    TokenEvent,
)
from tests.engine.engine_harness import SYNTH, synthetic
from tests.tiny_models import make_tiny_gemma3_dir, make_tiny_llama_dir

PREFILL_CHUNK = 16  # small, so prompts span several chunks


def reference_tokens(model_dir, prompts, max_tokens, *, prefill_step_size=PREFILL_CHUNK):
    model, tokenizer = mlx_load(str(model_dir))
    out = []
    for prompt in prompts:
        tokens = [
            r.token
            for r in stream_generate(
                model, tokenizer, prompt, max_tokens=max_tokens, prefill_step_size=prefill_step_size
            )
            if r.finish_reason != "stop" or r.token not in tokenizer.eos_token_ids
        ]
        out.append(tokens)
    return out


def make_prompts(n, *, vocab, seed, min_len=3, max_len=60):
    rng = random.Random(seed)
    # skip the first ids: special tokens (EOS would end a reply at once)
    return [
        [rng.randrange(100, vocab) for _ in range(rng.randint(min_len, max_len))] for _ in range(n)
    ]


async def run_engine(
    model_dir,
    prompts,
    max_tokens,
    *,
    stagger,
    prefill_chunk=PREFILL_CHUNK,
    specs=None,
    draft_dir=None,
):
    eng = Engine(
        EngineConfig(
            model=str(model_dir),
            draft_model=str(draft_dir) if draft_dir else None,
            prefill_chunk=prefill_chunk,
            prompt_cache=False,
            log_blas=False,
            extra_drafters=SYNTH.entry(),
        )
    )
    eng.start()
    await eng.wait_ready()
    results: dict[int, list[int]] = {}

    async def one(i, prompt):
        tokens: list[int] = []
        spec = specs[i] if specs else SpeculativeParams()
        async for event in eng.submit(
            GenerationRequest(prompt_tokens=prompt, max_tokens=max_tokens, speculative=spec)
        ):
            if isinstance(event, TokenEvent):
                tokens.extend(event.token_ids)
            elif isinstance(event, FinishedEvent):
                assert event.token_ids == tokens
                results[i] = tokens
                return
            elif isinstance(event, ErrorEvent):
                raise AssertionError(f"request failed: {event.message}")

    tasks = []
    for i, prompt in enumerate(prompts):
        tasks.append(asyncio.create_task(one(i, prompt)))
        if stagger:
            await asyncio.sleep(0.02 * (i % 3))
    await asyncio.gather(*tasks)
    await eng.stop()
    return [results[i] for i in range(len(prompts))]


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    return make_tiny_llama_dir(tmp_path_factory.mktemp("tiny_llama"))


@pytest.fixture(scope="module")
def tiny_gemma3(tmp_path_factory):
    return make_tiny_gemma3_dir(tmp_path_factory.mktemp("tiny_gemma3"), sliding_window=8)


@pytest.mark.parametrize("concurrency", [1, 4, 8])
def test_tiny_llama_batch_equals_generate(tiny_llama, concurrency):
    prompts = make_prompts(concurrency, vocab=49152, seed=concurrency)
    expected = reference_tokens(tiny_llama, prompts, max_tokens=24)
    got = asyncio.run(run_engine(tiny_llama, prompts, 24, stagger=concurrency > 1))
    assert got == expected


@pytest.mark.parametrize("concurrency", [1, 4, 8])
def test_tiny_sliding_window_batch_equals_generate(tiny_gemma3, concurrency):
    # prompts longer than the window of 8, and replies that wrap it again
    prompts = make_prompts(concurrency, vocab=49152, seed=10 + concurrency, min_len=9, max_len=40)
    expected = reference_tokens(tiny_gemma3, prompts, max_tokens=20)
    got = asyncio.run(run_engine(tiny_gemma3, prompts, 20, stagger=concurrency > 1))
    assert got == expected


def mixed_specs(prompts, references):
    """Every method in one batch, with different k: off, lookup, synthetic at two rates, auto."""
    kinds = [
        SpeculativeParams(),
        SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=3, ngram_max=3),
        (4, 0.5),  # synthetic: k and acceptance
        (9, 0.9),
        SpeculativeParams(method=SpecMethod.AUTO, draft_tokens=6),
    ]
    out = []
    for i, (prompt, ref) in enumerate(zip(prompts, references)):
        spec = kinds[i % len(kinds)]
        if isinstance(spec, tuple):
            k, acceptance = spec
            spec = synthetic(prompt, ref, acceptance, k)
        out.append(spec)
    return out


def repetitive_prompts(n, *, seed, vocab=49152):
    """Prompts that repeat themselves, so prompt lookup has something to find."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        part = [rng.randrange(100, vocab) for _ in range(rng.randint(3, 24))]
        out.append(part + part[: rng.randint(1, len(part))])
    return out


@pytest.mark.parametrize("concurrency", [1, 4, 8])
def test_tiny_llama_speculative_rows_equal_generate(tiny_llama, concurrency):
    prompts = repetitive_prompts(concurrency, seed=20 + concurrency)
    expected = reference_tokens(tiny_llama, prompts, max_tokens=24)
    specs = mixed_specs(prompts, expected)
    got = asyncio.run(run_engine(tiny_llama, prompts, 24, stagger=concurrency > 1, specs=specs))
    assert got == expected


@pytest.mark.parametrize("concurrency", [1, 4, 8])
def test_tiny_sliding_window_speculative_rows_equal_generate(tiny_gemma3, concurrency):
    prompts = repetitive_prompts(concurrency, seed=30 + concurrency)
    expected = reference_tokens(tiny_gemma3, prompts, max_tokens=24)
    specs = mixed_specs(prompts, expected)
    got = asyncio.run(run_engine(tiny_gemma3, prompts, 24, stagger=concurrency > 1, specs=specs))
    assert got == expected


@pytest.mark.parametrize("draft", ["same", "other", "sliding", "sliding-same"])
def test_draft_model_rows_equal_generate(tiny_llama, tiny_gemma3, tmp_path_factory, draft):
    # "same": the target drafts for itself (every draft accepted: long runs, rollbacks of 0);
    # "other": an unrelated random draft (almost every draft rejected); "sliding": a
    # sliding-window draft (window 8, shorter than the prompts); "sliding-same": a sliding-window
    # target drafting for itself (window-limited masks over the draft's whole history)
    target = tiny_gemma3 if draft == "sliding-same" else tiny_llama
    draft_dir = {
        "same": tiny_llama,
        "other": make_tiny_llama_dir(tmp_path_factory.mktemp("draft"), seed=7, num_layers=1),
        "sliding": tiny_gemma3,
        "sliding-same": tiny_gemma3,
    }[draft]
    prompts = repetitive_prompts(6, seed=40)
    expected = reference_tokens(target, prompts, max_tokens=20)
    specs = [
        SpeculativeParams(method=SpecMethod.DRAFT_MODEL, draft_tokens=k) for k in (4, 1, 7)
    ] + [
        SpeculativeParams(),
        SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=3),
        SpeculativeParams(method=SpecMethod.AUTO, draft_tokens=5),
    ]
    got = asyncio.run(
        run_engine(target, prompts, 20, stagger=True, specs=specs, draft_dir=draft_dir)
    )
    assert got == expected


def test_whole_buffer_attention_rows_equal_generate(tiny_llama, monkeypatch):
    # the GPU's mode (engine/cache/ragged.py): verify forwards attend over the whole buffer,
    # its unwritten tail masked; forced on here, where the default is off
    import engine.cache.ragged as ragged

    monkeypatch.setattr(ragged, "default_whole_buffer", lambda: True)
    prompts = repetitive_prompts(6, seed=50)
    expected = reference_tokens(tiny_llama, prompts, max_tokens=24)
    specs = mixed_specs(prompts, expected)
    got = asyncio.run(run_engine(tiny_llama, prompts, 24, stagger=True, specs=specs))
    assert got == expected


@pytest.mark.parametrize("model", ["llama", "sliding"])
def test_a_target_drafting_for_itself_has_its_drafts_accepted(tiny_llama, tiny_gemma3, model):
    # Exactness holds for any draft; this checks the draft's own cache is right: drafting for
    # itself, rows that join mid-run, leave, take plain steps and lag a position behind the
    # target after each round must still see every draft accepted.
    path = tiny_llama if model == "llama" else tiny_gemma3

    async def run():
        eng = Engine(
            EngineConfig(
                model=str(path), draft_model=str(path), prefill_chunk=PREFILL_CHUNK, log_blas=False
            )
        )
        eng.start()
        await eng.wait_ready()
        stats = []

        async def one(i, prompt):
            await asyncio.sleep(0.03 * i)
            spec = (
                SpeculativeParams(method=SpecMethod.DRAFT_MODEL, draft_tokens=2 + i % 4)
                if i % 3
                else SpeculativeParams()
            )
            request = GenerationRequest(
                prompt_tokens=prompt, max_tokens=12 + 3 * i, speculative=spec
            )
            async for event in eng.submit(request):
                if isinstance(event, FinishedEvent) and i % 3:
                    stats.append(event.stats.spec)

        await asyncio.gather(*(one(i, p) for i, p in enumerate(repetitive_prompts(7, seed=60))))
        await eng.stop()
        return stats

    stats = asyncio.run(run())
    drafted = sum(s.draft_tokens for s in stats)
    assert drafted > 40
    assert sum(s.accepted_tokens for s in stats) / drafted >= 0.97
