"""The load-time probe for models whose output depends on how tokens are chunked past their
sliding window (engine/core/batch_check.py, `chunking_problem`): mlx-lm's plamo3 is found and
refused speculation and the prompt cache, with the reason; sliding-window models that chunk
exactly, and models without a window, are not."""

from __future__ import annotations

import pytest

from engine.core.batch_check import chunking_problem
from engine.requests import GenerationRequest, SpecMethod, SpeculativeParams, TokenEvent
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


def test_a_chunking_model_prefills_in_generates_chunks_beside_running_rows(tmp_path):
    """Its replies depend on where chunks fall, so no pacing, no share of a step's budget and no
    shorter-first split: each prompt goes in whole chunks from its start, as mlx_lm.generate's."""
    from mlx_lm import load
    from mlx_lm.generate import stream_generate

    from tests.engine.engine_harness import TinyModel, make_core

    path = save_folder(BY_NAME["plamo3"], tmp_path / "plamo3")
    model, tokenizer = load(str(path))
    chunk = 24
    core = make_core(TinyModel(path, model, tokenizer), prefill_chunk=chunk)
    assert core.scheduler.reference_chunks and core.scheduler.pacer.gap_factor is None
    core.scheduler.pacer.chunk = 10  # a pacer that had settled on 10 would change its replies
    offsets: dict[str, list[tuple[int, int]]] = {}
    schedule = core.scheduler.schedule

    def recording():
        plan = schedule()
        for c in plan.prefill:
            offsets.setdefault(c.state.request_id, []).append((c.state.prefilled, c.tokens))
        return plan

    core.scheduler.schedule = recording
    prompts = [[40 + (i * 7 + j) % 90 for j in range(n)] for i, n in enumerate((70, 9, 55, 30))]
    requests = [GenerationRequest(prompt_tokens=p, max_tokens=6) for p in prompts]
    tokens: dict[str, list[int]] = {}
    core.add(requests[0])
    for request in requests[1:]:  # the others join while the first decodes or prefills
        for _ in range(2):
            for event in core.step():
                if isinstance(event, TokenEvent):
                    tokens.setdefault(event.request_id, []).extend(event.token_ids)
        core.add(request)
    while core.has_work():
        for event in core.step():
            if isinstance(event, TokenEvent):
                tokens.setdefault(event.request_id, []).extend(event.token_ids)
    for request, prompt in zip(requests, prompts):
        steps = offsets[request.request_id]
        assert all(at % chunk == 0 and n == min(chunk, len(prompt) - 1 - at) for at, n in steps)
        reference = [
            r.token
            for r in stream_generate(
                model, tokenizer, prompt, max_tokens=6, prefill_step_size=chunk
            )
        ]
        assert tokens[request.request_id] == reference
