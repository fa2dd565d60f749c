"""Sliding-window models under speculation: a mask and the keys it masks always describe the
same positions. Short chats (left-padded, inside their window) share the batch with chats past
their window, rounds with drafts alternate with plain steps that rotate the window's buffer, and
rows join late; every row equals mlx_lm.generate alone."""

from __future__ import annotations

import asyncio
import json

import pytest

from engine.api import Engine, EngineConfig
from engine.bench.synthetic import SyntheticDrafter
from engine.requests import GenerationRequest, SpecMethod, SpeculativeParams
from tests.engine.engine_harness import TIMEOUT_S, VOCAB, collect, make_prompt
from tests.engine.test_exactness import reference_tokens
from tests.tiny_models import make_tiny_gemma3_dir

WINDOW = 8
N = 28


class EveryOtherRound(SyntheticDrafter):
    """Drafts the known reply on every other call only, so verify rounds and plain steps (which
    rotate a sliding window's buffer) alternate."""

    def __init__(self) -> None:
        super().__init__(vocab_size=VOCAB)
        self.calls = 0

    def propose(self, rows):
        self.calls += 1
        return super().propose(rows) if self.calls % 2 else [[] for _ in rows]


@pytest.fixture(scope="module")
def gemma3(tmp_path_factory):
    return make_tiny_gemma3_dir(tmp_path_factory.mktemp("gemma3"), sliding_window=WINDOW)


@pytest.mark.parametrize("acceptance", [0.5, 1.0])
def test_short_and_long_rows_with_alternating_rounds_equal_generate(gemma3, acceptance):
    prompts = [
        make_prompt(1, 3 * WINDOW + 5),  # past the window before it starts
        make_prompt(2, 3),  # left-padded, inside its window for a while
        make_prompt(3, WINDOW - 2),
        make_prompt(4, 2),  # joins late
    ]
    expected = reference_tokens(gemma3, prompts, max_tokens=N)
    drafter = EveryOtherRound()
    for prompt, reference in zip(prompts, expected):
        drafter.expect(prompt, reference, acceptance)
    synthetic = SpeculativeParams(method=SpecMethod.SYNTHETIC, draft_tokens=3)

    async def main():
        eng = Engine(
            EngineConfig(
                model=str(gemma3),
                prefill_chunk=16,
                prompt_cache=False,
                log_blas=False,
                extra_drafters=drafter.entry(),
            )
        )
        eng.start()
        await asyncio.wait_for(eng.wait_ready(), TIMEOUT_S)
        try:
            specs = [synthetic, SpeculativeParams(), synthetic, synthetic]
            first = [
                asyncio.ensure_future(
                    collect(eng, GenerationRequest(prompt_tokens=p, max_tokens=N, speculative=s))
                )
                for p, s in zip(prompts[:3], specs)
            ]
            await asyncio.sleep(0.05)
            late = await collect(
                eng, GenerationRequest(prompt_tokens=prompts[3], max_tokens=N, speculative=specs[3])
            )
            return [await f for f in first] + [late]
        finally:
            await eng.stop()

    outcomes = asyncio.run(main())
    assert [o.finished.token_ids for o in outcomes] == expected
    assert drafter.calls > 4


def test_a_model_that_cannot_batch_runs_one_row_at_a_time_exactly(tmp_path):
    """gemma2's attention in mlx-lm cannot take a batch mask; such a model is found out when it
    loads and runs one request at a time, saying why, never batched wrong."""
    from engine.requests import FinishedEvent
    from tests.tiny_models import _save

    config = {
        "model_type": "gemma2",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "head_dim": 16,
        "rms_norm_eps": 1e-6,
        "vocab_size": VOCAB,
        "num_key_value_heads": 2,
        "query_pre_attn_scalar": 16,
        "eos_token_id": 2,
    }
    path = _save(
        tmp_path / "gemma2",
        config,
        seed=0,
        quantize_bits=None,
        group_size=32,
        tokenizer_src=None,
    )
    prompts = [make_prompt(i, 5 + 3 * i) for i in range(3)]
    expected = reference_tokens(path, prompts, max_tokens=12)

    async def main():
        eng = Engine(EngineConfig(model=str(path), prompt_cache=False, log_blas=False))
        eng.start()
        info = await asyncio.wait_for(eng.wait_ready(), TIMEOUT_S)
        try:
            outs = await asyncio.gather(
                *(eng.generate(GenerationRequest(prompt_tokens=p, max_tokens=12)) for p in prompts)
            )
            return info, outs
        finally:
            await eng.stop()

    info, outs = asyncio.run(main())
    assert "one request at a time" in info.batching_note
    assert all(isinstance(o, FinishedEvent) for o in outs)
    assert [o.token_ids for o in outs] == expected


def test_a_turn_that_ended_with_eos_past_the_window_serves_the_next_turn(tmp_path):
    """A wrapped sliding window cannot give back the EOS it was fed, so the turn is stored with
    it: the next turn's prompt (reply, end of turn, new message) finds it."""
    from tests.engine.engine_harness import with_engine

    plain = make_tiny_gemma3_dir(tmp_path / "plain", sliding_window=WINDOW)
    prompt = make_prompt(70, 3 * WINDOW)
    reply = reference_tokens(plain, [prompt], max_tokens=12)[0]
    eos = reply[6]  # a model whose end-of-sequence token it reaches inside the window's wrap
    model = make_tiny_gemma3_dir(tmp_path / "eos", sliding_window=WINDOW, eos_token_id=eos)
    generation = model / "generation_config.json"  # mlx-lm reads the EOS from here first
    generation.write_text(json.dumps({**json.loads(generation.read_text()), "eos_token_id": eos}))
    first_ref = reference_tokens(model, [prompt], max_tokens=12)[0]
    assert first_ref == reply[: reply.index(eos)]

    async def body(eng):
        first = await eng.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=12))
        follow = prompt + first.token_ids + [eos] + make_prompt(71, 4)
        second = await eng.generate(GenerationRequest(prompt_tokens=follow, max_tokens=8))
        return first, follow, second, eng.stats().cache

    first, follow, second, cache = with_engine(model, body)
    assert first.token_ids == first_ref
    assert second.token_ids == reference_tokens(model, [follow], max_tokens=8)[0]
    assert second.stats.cached_tokens == len(prompt) + len(first_ref) + 1
