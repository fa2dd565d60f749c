"""Beside another model's decoding chat, a prompt on a model with no rows of its own is paced
by that chat's decode step (engine/worker.py tells each model's pacer before its step), not taken
in whole chunks; both replies stay exactly mlx_lm.generate's."""

from __future__ import annotations

import asyncio

import pytest
from mlx_lm import load as mlx_load

from engine.core.prefill_pacer import PrefillPacer
from engine.requests import GenerationRequest
from tests.engine.engine_harness import P_A, TinyModel, make_prompt
from tests.engine.several_models_support import run, timed, tokens_of
from tests.tiny_models import make_tiny_llama_dir

N = 24  # tokens of the long prompt's reply


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, TinyModel]:
    """Two tiny random llamas with the same tokenizer and different weights."""
    root = tmp_path_factory.mktemp("models")
    made = {}
    for seed, name in enumerate("ab", start=10):
        path = make_tiny_llama_dir(root / name, seed=seed, tie_word_embeddings=False)
        model, tokenizer = mlx_load(str(path))
        made[name] = TinyModel(path, model, tokenizer)
    return made


def test_a_long_prompt_on_one_model_is_paced_while_another_models_chat_decodes(models, monkeypatch):
    """b's chat decodes while a processes a long prompt with nothing of its own to decode: a's
    chunks are paced by b's decode step (whole 512-token chunks held b's chat a step each), and
    both replies stay exact."""
    a, b = models["a"], models["b"]
    long_prompt = make_prompt(30, 400)
    chat_tokens = 1000  # b's reply outlasts a's prompt on any machine
    beside: list[int] = []  # a's prompt tokens per step while b's rows decoded
    real_observe = PrefillPacer.observe

    def recorded(self, seconds, *, prefill_tokens, decoding, **what):
        if prefill_tokens > len(P_A) and not decoding:  # a's prompt: a has no rows of its own
            beside.append(prefill_tokens)
        real_observe(self, seconds, prefill_tokens=prefill_tokens, decoding=decoding, **what)

    monkeypatch.setattr(PrefillPacer, "observe", recorded)

    async def body(eng):
        await eng.load_model(str(b.path))
        chat: list = []

        async def chatting():
            request = GenerationRequest(
                prompt_tokens=P_A, max_tokens=chat_tokens, model=str(b.path)
            )
            async for event in eng.submit(request):
                chat.append((0.0, event))

        going = asyncio.ensure_future(chatting())
        while not tokens_of(chat):  # b's chat is decoding
            await asyncio.sleep(0.01)
        long = await timed(eng, GenerationRequest(prompt_tokens=long_prompt, max_tokens=N))
        await going
        return chat, long

    chat, long = run(body, model=a.path, prefill_chunk=512, prompt_cache=False)
    assert tokens_of(chat) == b.greedy(P_A, chat_tokens)
    assert tokens_of(long) == a.greedy(long_prompt, N)
    assert len(beside) >= 2 and beside[0] <= 64 and max(beside) < len(long_prompt) - 1, beside
