"""Several models at once with the real default model: the built-in SmolLM2 and a model cut
from its layers serve four chats together, every reply exact."""

from __future__ import annotations

import asyncio

import pytest

from engine.requests import GenerationRequest, SpeculativeParams
from tests.engine.engine_harness import TinyModel, collect
from tests.engine.several_models_support import LOOKUP, draft, run


@pytest.mark.slow
def test_the_default_model_and_a_layer_cut_of_it_serve_chats_together_exactly(tmp_path):
    """The built-in SmolLM2 and a model cut from its layers (another folder, same tokenizer)
    answer four chats at once, two each, one of them drafting with the cut: every reply is
    what mlx_lm.generate gives for that chat alone."""
    from mlx_lm import load as mlx_load

    from engine.bench.layer_draft import make_layer_draft
    from engine.default_model import ensure_default_model
    from engine.prompt import apply_chat_template

    built_in = ensure_default_model()
    cut = make_layer_draft(built_in, tmp_path / "cut", first=4, last=2)
    questions = ["What is the capital of France?", "Name three colours.", "Why is the sky blue?"]
    n = 12
    references = {}
    for path in (built_in, cut):
        model, tokenizer = mlx_load(str(path))
        tiny = TinyModel(path, model, tokenizer)
        for q in questions:
            ids = apply_chat_template([{"role": "user", "content": q}], tokenizer)
            references[(str(path), q)] = tiny.greedy(ids, n)

    async def body(eng):
        def ask(question, model=None, speculative=None):
            request = GenerationRequest(
                messages=[{"role": "user", "content": question}],
                max_tokens=n,
                model=model,
                speculative=speculative or SpeculativeParams(),
            )
            return collect(eng, request)

        return await asyncio.gather(
            ask(questions[0]),
            ask(questions[1], speculative=draft(cut, k=3)),
            ask(questions[0], model=str(cut)),
            ask(questions[2], model=str(cut), speculative=LOOKUP),
        )

    plain, drafted, on_cut, looked_up = run(body, model=None, prompt_cache=False)
    assert plain.finished.token_ids == references[(str(built_in), questions[0])]
    assert drafted.finished.token_ids == references[(str(built_in), questions[1])]
    assert drafted.finished.stats.spec.rounds > 0
    assert on_cut.finished.token_ids == references[(str(cut), questions[0])]
    assert looked_up.finished.token_ids == references[(str(cut), questions[2])]
