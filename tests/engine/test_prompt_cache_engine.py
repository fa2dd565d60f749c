"""The prompt cache inside the engine: a chat's next turn, a restart, a shared system prompt and
a draft model all reuse computed state and still give exactly the cold run's tokens."""

from __future__ import annotations

import asyncio

import pytest

from engine.api import Engine, EngineConfig
from engine.requests import GenerationRequest, SpecMethod, SpeculativeParams
from tests.tiny_models import make_tiny_llama_dir

SYSTEM = {"role": "system", "content": "You are a concise assistant. Answer in one sentence."}
TURN1 = [SYSTEM, {"role": "user", "content": "Name a large city in France."}]
LOOKUP = SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=4)


def turn2(reply: str) -> list[dict]:
    return TURN1 + [
        {"role": "assistant", "content": reply},
        {"role": "user", "content": "And one in Italy?"},
    ]


async def run(config: EngineConfig, conversations, *, spec=None, max_tokens=16):
    eng = Engine(config)
    eng.start()
    await eng.wait_ready()
    out = []
    for messages in conversations:
        if callable(messages):
            messages = messages(out[-1].text)
        req = GenerationRequest(
            messages=messages, max_tokens=max_tokens, speculative=spec or SpeculativeParams()
        )
        out.append(await eng.generate(req))
    stats = eng.stats()
    await eng.stop()
    return out, stats


@pytest.fixture
def cache_dir(tmp_path):
    return str(tmp_path / "prompt-cache")


@pytest.mark.parametrize("spec", [None, LOOKUP], ids=["plain", "lookup"])
def test_second_turn_reuses_the_first_and_matches_a_cold_run(cache_dir, spec):
    warm, stats = asyncio.run(
        run(EngineConfig(prompt_cache_dir=cache_dir, log_blas=False), [TURN1, turn2], spec=spec)
    )
    first, second = warm
    cold, _ = asyncio.run(
        run(EngineConfig(prompt_cache=False, log_blas=False), [turn2(first.text)], spec=spec)
    )
    assert second.token_ids == cold[0].token_ids
    assert second.stats.cache_source == "ram"
    assert second.stats.prompt_cache_note is None  # a model that uses the cache has no note
    # the whole first turn (prompt and reply) up to where the template re-renders it
    assert second.stats.cached_tokens >= first.stats.prompt_tokens
    assert stats.cache.hits >= 1 and stats.cache.ram_bytes > 0 and stats.cache.ram_entries >= 1


def test_cache_survives_a_restart(cache_dir):
    config = EngineConfig(prompt_cache_dir=cache_dir, log_blas=False)
    (first,), _ = asyncio.run(run(config, [TURN1]))
    (second,), stats = asyncio.run(run(config, [turn2(first.text)]))
    (cold,), _ = asyncio.run(
        run(EngineConfig(prompt_cache=False, log_blas=False), [turn2(first.text)])
    )
    assert second.stats.cache_source == "disk"
    assert second.stats.cached_tokens >= first.stats.prompt_tokens
    assert second.token_ids == cold.token_ids
    assert stats.cache.disk_entries >= 1 and stats.cache.disk_bytes > 0


def test_shared_system_prompt_hits_across_conversations(cache_dir):
    other = [SYSTEM, {"role": "user", "content": "What colour is the sky?"}]
    (a, b), _ = asyncio.run(
        run(EngineConfig(prompt_cache_dir=cache_dir, log_blas=False), [TURN1, other])
    )
    assert a.stats.cached_tokens == 0
    assert b.stats.cached_tokens > 10  # the system prompt and the template around it
    (cold,), _ = asyncio.run(run(EngineConfig(prompt_cache=False, log_blas=False), [other]))
    assert b.token_ids == cold.token_ids


def test_corrupt_cache_files_are_skipped_after_a_restart(cache_dir):
    from pathlib import Path

    config = EngineConfig(prompt_cache_dir=cache_dir, log_blas=False)
    (first,), _ = asyncio.run(run(config, [TURN1]))
    files = list(Path(cache_dir).rglob("*.safetensors"))
    assert files
    truncated = {}
    for f in files:
        f.write_bytes(f.read_bytes()[: len(f.read_bytes()) // 2])
        truncated[f] = f.stat().st_size
    (again,), stats = asyncio.run(run(config, [TURN1]))
    assert again.token_ids == first.token_ids
    assert again.stats.cached_tokens == 0
    # each truncated file was removed (and the same reply may have been written anew, whole)
    assert all(not f.exists() or f.stat().st_size > n for f, n in truncated.items())
    assert sum(stats.cache.skipped.values()) >= 1


def test_draft_model_caches_are_restored_with_the_target(tmp_path, cache_dir):
    target = make_tiny_llama_dir(tmp_path / "t", tie_word_embeddings=False)
    draft = make_tiny_llama_dir(tmp_path / "d", seed=3, num_layers=1, tie_word_embeddings=False)
    prompt = [100 + i for i in range(20)]
    spec = SpeculativeParams(method=SpecMethod.DRAFT_MODEL, draft_tokens=3)

    async def go(config):
        eng = Engine(config)
        eng.start()
        await eng.wait_ready()
        first = await eng.generate(
            GenerationRequest(prompt_tokens=prompt, max_tokens=12, speculative=spec)
        )
        longer = prompt + first.token_ids + [500, 501]
        second = await eng.generate(
            GenerationRequest(prompt_tokens=longer, max_tokens=12, speculative=spec)
        )
        await eng.stop()
        return first, second

    common = dict(model=str(target), draft_model=str(draft), log_blas=False)
    warm = asyncio.run(go(EngineConfig(prompt_cache_dir=cache_dir, **common)))
    cold = asyncio.run(go(EngineConfig(prompt_cache=False, **common)))
    assert warm[1].stats.cached_tokens >= len(prompt) + len(warm[0].token_ids) - 1
    assert [r.token_ids for r in warm] == [r.token_ids for r in cold]
    assert warm[1].stats.spec.rounds > 0
