"""The load-time probe for models whose output depends on how tokens are chunked past their
sliding window (engine/core/batch_check.py, `chunking_problem`): mlx-lm's plamo3 is found and
refused speculation and the prompt cache, with the reason; sliding-window models that chunk
exactly, and models without a window, are not."""

from __future__ import annotations

import pytest

from engine.core.batch_check import chunking_problem
from engine.requests import GenerationRequest, SpecMethod, SpeculativeParams
from tests.architectures.build import build_model, save_folder
from tests.architectures.catalog import BY_NAME


@pytest.mark.parametrize(
    ("name", "flagged"),
    [("plamo3", True), ("gemma3_text", False), ("gpt_oss", False), ("cohere2", False),
     ("llama", False)],
)  # fmt: skip
def test_probe(name, flagged):
    model, _ = build_model(BY_NAME[name])
    problem = chunking_problem(model)
    assert (problem is not None) == flagged, problem
    if flagged:
        assert "chunked" in problem


def test_a_chunking_model_is_refused_speculation_and_the_prompt_cache(tmp_path):
    from tests.engine.engine_harness import with_engine

    path = save_folder(BY_NAME["plamo3"], tmp_path / "plamo3")
    prompt = [5 + i for i in range(30)]

    async def body(eng):
        info = await eng.wait_ready()
        lookup = SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=3)
        refused = [e async for e in eng.submit(
            GenerationRequest(prompt_tokens=prompt, max_tokens=4, speculative=lookup)
        )]  # fmt: skip
        plain = await eng.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=4))
        again = await eng.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=4))
        return info, refused, plain, again, eng.stats().cache

    info, refused, plain, again, stats = with_engine(
        path, body, prompt_cache=True, prompt_cache_dir=str(tmp_path / "cache")
    )
    assert "plamo3" in info.speculation_note and "chunked" in info.speculation_note
    assert "prompt cache" in info.prompt_cache_note
    assert any("lookup" in getattr(e, "message", "") for e in refused), refused
    assert plain.stats.cached_tokens == again.stats.cached_tokens == 0
    # each reply says why it got nothing from the cache (the app shows "off" with this reason)
    assert plain.stats.prompt_cache_note == again.stats.prompt_cache_note == info.prompt_cache_note
    assert stats.skipped.get("chunking", 0) >= 2 and stats.ram_entries == 0, stats
