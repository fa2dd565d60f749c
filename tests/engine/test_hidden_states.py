"""Hidden states for drafters (engine/hidden.py, /work/notes/HIDDEN_API.md): the split forward
gives the model's own logits and its LM head's input; a model whose logits are not its head's
output is refused by name; in the engine a drafter that reads hidden states is handed every kept
position exactly once, oldest first, ending just before the pending token, with the values a
forward over the row alone gives; rejected draft positions never; and every row's tokens stay
identical to mlx_lm.generate."""

from __future__ import annotations

import asyncio
import random

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from mlx_lm import load as mlx_load

from engine.hidden import attach, lm_head, split_forward
from engine.requests import GenerationRequest, SpecMethod, SpeculativeParams
from engine.speculative.drafter import Drafter, DraftRow
from tests.engine.engine_harness import P_A, P_B, P_C, TinyModel, collect, with_engine
from tests.tiny_models import make_tiny_llama_dir, make_tiny_qwen3_next_dir

MAX_TOKENS = 24


class HiddenProbe(Drafter):
    """Drafts the known greedy reply (some tokens corrupted) and records what it is handed."""

    name = SpecMethod.MTP.value
    wants_hidden_states = True

    def __init__(self, references: dict[tuple[int, ...], list[int]]) -> None:
        self.references = references
        self.rng = random.Random(7)
        self.handed: dict[str, list[tuple[int, np.ndarray, int]]] = {}  # start, hidden, len(row)

    def entry(self):
        return ((self.name, lambda _target: self),)

    def propose(self, rows: list[DraftRow]) -> list[list[int]]:
        out = []
        for row in rows:
            if row.hidden is not None:
                hidden = np.array(row.hidden.astype(mx.float32))
                self.handed.setdefault(row.request_id, []).append(
                    (row.hidden_start, hidden, len(row))
                )
            reference = self.references[tuple(row.prompt)]
            start = len(row.generated)
            truth = reference[start : start + row.k]
            out.append([t if self.rng.random() < 0.6 else 1 for t in truth])
        return out


@pytest.fixture(scope="module")
def tied(tmp_path_factory):
    path = make_tiny_llama_dir(tmp_path_factory.mktemp("tied"), tie_word_embeddings=True)
    return path, *mlx_load(str(path))


def test_split_forward_is_the_models_own_forward(tiny, tied):
    for model in (tiny.model, tied[1]):
        assert attach(model) is None
        x = mx.array([[5, 300, 7000, 12, 99]])
        hidden, logits = split_forward(model, x, None)
        assert mx.array_equal(logits, model(x))
        assert mx.allclose(hidden, model.model(x), atol=1e-5)
        assert mx.array_equal(lm_head(model)(hidden), logits)


def test_a_model_whose_logits_are_not_its_heads_output_is_refused():
    class Body(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(32, 8)
            self.norm = nn.RMSNorm(8)

        def __call__(self, x, cache=None):
            return self.norm(self.embed_tokens(x))

    class Softcapped(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = Body()
            self.lm_head = nn.Linear(8, 32)
            self.layers = []

        def __call__(self, x, cache=None):
            return 30.0 * mx.tanh(self.lm_head(self.model(x)) / 30.0)

    problem = attach(Softcapped())
    assert problem is not None and "softcapping" in problem


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory) -> TinyModel:
    path = make_tiny_qwen3_next_dir(tmp_path_factory.mktemp("qwen3_next"))
    return TinyModel(path, *mlx_load(str(path)))


@pytest.mark.parametrize("kind", ["llama", "hybrid"])
def test_engine_hands_each_kept_position_once(kind, request):
    """A hybrid model's rows go back to their state from before a round and replay what
    they kept: those positions are not handed over twice."""
    tiny = request.getfixturevalue("tiny" if kind == "llama" else "hybrid")
    prompts = [P_A, P_B, P_C]
    references = {tuple(p): tiny.greedy(p, MAX_TOKENS) for p in prompts}
    probe = HiddenProbe(references)
    mtp = SpeculativeParams(method=SpecMethod.MTP, draft_tokens=3)
    specs = [mtp, SpeculativeParams(), mtp]

    async def body(eng):
        async def one(i, prompt):
            await asyncio.sleep(0.05 * i)  # the last joins a running batch
            request = GenerationRequest(
                prompt_tokens=prompt,
                max_tokens=MAX_TOKENS,
                speculative=specs[i],
                request_id=f"r{i}",
            )
            return await collect(eng, request)

        return await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts)))

    outcomes = with_engine(
        tiny.path, body, prefill_chunk=8, prompt_cache=False, extra_drafters=probe.entry()
    )
    for prompt, outcome in zip(prompts, outcomes):
        assert outcome.tokens == references[tuple(prompt)]
    assert "r1" not in probe.handed  # a plain row's drafter reads nothing
    for i in (0, 2):
        rid, prompt = f"r{i}", prompts[i]
        reply = outcomes[i].tokens
        handed = probe.handed[rid]
        assert len(handed) > 3  # verify rounds, not only the first proposal
        assert handed[0][0] == 0  # no prompt-cache hit: from the first position
        expected_start = 0
        for start, hidden, length in handed:
            assert start == expected_start, "each position exactly once, oldest first"
            assert start + hidden.shape[0] == length - 1, "the last: just before the pending token"
            expected_start = start + hidden.shape[0]
        tokens = mx.array([(prompt + reply)[:expected_start]])
        want = np.array(split_forward(tiny.model, tokens, None)[0][0])
        got = np.concatenate([h for _, h, _ in handed])
        np.testing.assert_allclose(got, want, atol=2e-4, rtol=1e-3)
