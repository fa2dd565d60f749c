"""KV-cache quantization with the prompt cache (the namespace holds the kv settings) and invalid
settings; the batching and speculation tests are in test_kv_quantization.py."""

from __future__ import annotations

import asyncio

import pytest
from mlx_lm import load as mlx_load

from engine.api import Engine, EngineConfig
from engine.cache.kv_quant import KVQuant, KVQuantError
from engine.requests import GenerationRequest
from tests.engine.test_kv_quantization import PREFILL_CHUNK, make_prompts, run_engine
from tests.tiny_models import make_tiny_llama_dir


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return make_tiny_llama_dir(tmp_path_factory.mktemp("llama64"), head_dim=64)


# -- (c, d) the prompt cache with quantized rows ------------------------------------------------


async def two_turns(model_dir, prompt, cache_dir, *, bits, restart=False, n=12):
    """Turn 1, then turn 2 = turn 1's prompt + reply + new tokens (optionally after a restart).
    Returns both FinishedEvents."""
    config = EngineConfig(
        model=str(model_dir),
        prompt_cache_dir=str(cache_dir),
        kv_bits=bits,
        prefill_chunk=PREFILL_CHUNK,
        log_blas=False,
    )
    eng = Engine(config)
    eng.start()
    await eng.wait_ready()
    first = await eng.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=n))
    if restart:
        await eng.stop()
        eng = Engine(config)
        eng.start()
        await eng.wait_ready()
    longer = prompt + first.token_ids + [321, 654, 987]
    second = await eng.generate(GenerationRequest(prompt_tokens=longer, max_tokens=n))
    await eng.stop()
    return first, second


@pytest.mark.parametrize("bits,restart", [(8, False), (4, False), (4, True)])
def test_prompt_cache_hit_equals_cold_quantized_run(llama, tmp_path, bits, restart):
    prompt = make_prompts(1, seed=120, min_len=30, max_len=30)[0]
    first, second = asyncio.run(
        two_turns(llama, prompt, tmp_path / "prompt-cache", bits=bits, restart=restart)
    )
    longer = prompt + first.token_ids + [321, 654, 987]
    (cold,) = asyncio.run(run_engine(llama, [longer], kv_bits=bits, n=12))
    assert second.stats.cached_tokens >= len(prompt) + len(first.token_ids) - 1
    assert second.stats.cache_source == ("disk" if restart else "ram")
    assert second.token_ids == cold.token_ids


def test_kv_settings_are_part_of_the_namespace(llama, tmp_path):
    cache_dir = tmp_path / "prompt-cache"
    prompt = make_prompts(1, seed=130, min_len=30, max_len=30)[0]
    asyncio.run(two_turns(llama, prompt, cache_dir, bits=4))  # 4-bit entries on disk

    async def again(bits, **kv):
        eng = Engine(
            EngineConfig(
                model=str(llama),
                prompt_cache_dir=str(cache_dir),
                kv_bits=bits,
                log_blas=False,
                **kv,
            )
        )
        eng.start()
        await eng.wait_ready()
        done = await eng.generate(GenerationRequest(prompt_tokens=prompt + [5, 6], max_tokens=2))
        await eng.stop()
        return done.stats.cached_tokens

    assert asyncio.run(again(8)) == 0  # an 8-bit engine never reuses a 4-bit entry
    assert asyncio.run(again(None)) == 0  # nor an unquantized one
    assert asyncio.run(again(4, kv_group_size=32)) == 0  # nor another group size
    assert asyncio.run(again(4, kv_start=1)) == 0  # nor another start
    assert asyncio.run(again(4)) >= len(prompt)  # the same settings do


def test_namespace_fields():
    from engine.cache.reuse import PromptReuse

    class Loaded:  # just enough of a LoadedModel for model_identity / tokenizer_hash
        path = "/nonexistent-model"
        weights_id = None
        tokenizer = None

    import engine.cache.reuse as reuse

    original = reuse.tokenizer_hash
    reuse.tokenizer_hash = lambda loaded: "tok"
    try:
        off = PromptReuse(None, Loaded()).namespace
        q8 = PromptReuse(None, Loaded(), kv=KVQuant(8, 64, 0)).namespace
        q4 = PromptReuse(None, Loaded(), kv=KVQuant(4, 64, 0)).namespace
    finally:
        reuse.tokenizer_hash = original
    assert (q8.kv_bits, q8.kv_group_size, q8.kv_start) == (8, 64, 0)
    assert off.kv_bits is None
    assert len({off.key(), q8.key(), q4.key()}) == 3


# -- (e) invalid settings -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "settings,message",
    [
        ({"kv_bits": 3}, "kv_bits must be 4 or 8"),
        ({"kv_bits": 8, "kv_group_size": 48}, "kv_group_size must be 32, 64 or 128"),
        ({"kv_bits": 8, "kv_start": -1}, "kv_start must be"),
        ({"kv_bits": 4, "kv_group_size": 128}, "does not divide this model's attention head"),
    ],
)
def test_invalid_settings_fail_the_load_clearly(llama, settings, message):
    async def go():
        eng = Engine(EngineConfig(model=str(llama), prompt_cache=False, log_blas=False, **settings))
        eng.start()
        try:
            with pytest.raises(KVQuantError, match=message):
                await eng.wait_ready()
        finally:
            await eng.stop()

    asyncio.run(go())


def test_group_size_must_divide_the_head_size(tmp_path):
    small = make_tiny_llama_dir(tmp_path / "small")  # head size 16: no group size fits
    with pytest.raises(KVQuantError, match="head size 16.*turn KV quantization off"):
        KVQuant(8, 32).check_model(mlx_load(str(small))[0])
    KVQuant(8, 32).check_model(mlx_load(str(make_tiny_llama_dir(tmp_path / "h32", head_dim=32)))[0])
