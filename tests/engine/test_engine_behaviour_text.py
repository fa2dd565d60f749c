"""What a reply's text looks like through the public Engine API: stop strings (also inside an
accepted speculative run), EOS inside an accepted run, streamed UTF-8. (TextStream and the
prompt-lookup search alone, without a model: test_text_stream_and_lookup.py.)

The tiny model has untied embeddings: a tied tiny random model only repeats its last input
token, which would make every reply the same word over and over.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from dataclasses import dataclass

import engine  # noqa: F401  (OpenBLAS before MLX)

# isort: split
import pytest
from mlx_lm import load as mlx_load
from mlx_lm.generate import stream_generate

from engine.api import Engine, EngineConfig
from engine.requests import (
    FinishReason,
    GenerationRequest,
    SpeculativeParams,
)
from engine.text_stream import TextStream
from tests.engine.engine_harness import SYNTH, TIMEOUT_S, Outcome, collect, make_prompt
from tests.engine.engine_harness import synthetic as harness_synthetic
from tests.tiny_models import make_tiny_llama_dir

K = 8  # draft tokens in the speculative runs: each round emits 8 accepted tokens + 1


PROMPT = make_prompt(11, 24)


@dataclass
class TinyModel:
    path: object
    model: object
    tokenizer: object

    def greedy(self, prompt: list[int], max_tokens: int) -> tuple[list[int], str | None]:
        """mlx_lm.generate's greedy tokens (EOS dropped) and its finish reason."""
        tokens, reason = [], None
        for r in stream_generate(self.model, self.tokenizer, prompt, max_tokens=max_tokens):
            reason = r.finish_reason
            if not (reason == "stop" and r.token in self.tokenizer.eos_token_ids):
                tokens.append(r.token)
        return tokens, reason

    def text_ends(self, tokens: list[int]) -> tuple[str, list[int]]:
        """The streamed text of `tokens` and its length after each token (as mlx-lm streams)."""
        detokenizer = self.tokenizer.detokenizer
        ends = []
        for token in tokens:
            detokenizer.add_token(token)
            ends.append(len(detokenizer.text))
        detokenizer.finalize()
        return detokenizer.text, ends


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> TinyModel:
    path = make_tiny_llama_dir(tmp_path_factory.mktemp("target"), tie_word_embeddings=False)
    model, tokenizer = mlx_load(str(path))
    return TinyModel(path, model, tokenizer)


@pytest.fixture(scope="module")
def reply(tiny) -> list[int]:
    tokens, reason = tiny.greedy(PROMPT, 40)
    assert reason == "length" and len(tokens) == 40
    return tokens


def run_requests(model_dir, requests: list[GenerationRequest]) -> list[Outcome]:
    """Run the requests at the same time on a fresh engine; stop it afterwards."""

    async def main():
        eng = Engine(
            EngineConfig(model=str(model_dir), log_blas=False, extra_drafters=SYNTH.entry())
        )
        eng.start()
        try:
            await asyncio.wait_for(eng.wait_ready(), TIMEOUT_S)
            return await asyncio.wait_for(
                asyncio.gather(*(collect(eng, r) for r in requests)), TIMEOUT_S
            )
        finally:
            await eng.stop()

    return asyncio.run(main())


def synthetic(reference: list[int], acceptance: float = 1.0, k: int = K) -> SpeculativeParams:
    return harness_synthetic(PROMPT, reference, acceptance, k)


def same_text_as_decode(text: str, decoded: str) -> bool:
    """mlx-lm's BPE streaming detokenizer drops the reply's leading space; decode keeps it."""
    return text == decoded or (decoded.startswith(" ") and text == decoded[1:])


# -- 3. stop strings -------------------------------------------------------------------------


def _pick_stop(tiny, reply) -> tuple[str, str, int]:
    """A stop string from the reply's middle that spans a token boundary and is completed by a
    token inside an accepted run (not the round's own last token). Returns (stop, the text
    before it, how many tokens the engine takes until it sees the stop)."""
    text, ends = tiny.text_ends(reply)
    for mid in range(len(reply) // 2, len(reply) - 4):
        boundary = ends[mid]
        stop = text[boundary - 3 : boundary + 3]
        if len(stop) < 6 or stop.strip() != stop:
            continue
        cut = text.find(stop)
        taken = next(i + 1 for i, end in enumerate(ends) if end >= cut + len(stop))
        if cut > 10 and (taken - 1) % (K + 1) != K:
            return stop, text[:cut], taken
    raise AssertionError(f"no usable stop string in {text!r}")


def test_stop_string_plain_and_inside_an_accepted_run(tiny, reply):
    stop, before, taken = _pick_stop(tiny, reply)
    [plain] = run_requests(
        tiny.path, [GenerationRequest(prompt_tokens=PROMPT, max_tokens=40, stop=(stop,))]
    )
    [spec] = run_requests(
        tiny.path,
        [
            GenerationRequest(
                prompt_tokens=PROMPT, max_tokens=40, stop=(stop,), speculative=synthetic(reply)
            )
        ],
    )
    for out in (plain, spec):
        assert out.finished.finish_reason == FinishReason.STOP
        assert out.finished.text == before
        assert "".join(out.deltas) == before
        assert all(stop not in delta for delta in out.deltas)
        assert out.tokens == out.finished.token_ids == reply[:taken]
        assert out.finished.stats.spec.emitted_tokens == taken  # none past the stop string
    assert spec.from_draft[-1] is True  # the stop was completed by an accepted draft token
    assert spec.finished.stats.spec.rounds >= 1


def test_earliest_stop_string_wins_and_absent_ones_do_nothing(tiny, reply):
    text, _ = tiny.text_ends(reply)
    early, late = text[12:16], text[30:36]
    cut = min(text.find(early), text.find(late))
    both, absent = run_requests(
        tiny.path,
        [
            GenerationRequest(prompt_tokens=PROMPT, max_tokens=40, stop=(late, early)),
            GenerationRequest(prompt_tokens=PROMPT, max_tokens=40, stop=("\x00never\x00",)),
        ],
    )
    assert both.finished.finish_reason == FinishReason.STOP
    assert both.finished.text == "".join(both.deltas) == text[:cut]
    assert absent.finished.finish_reason == FinishReason.LENGTH
    assert absent.finished.text == "".join(absent.deltas) == text
    assert absent.tokens == reply


# -- 4. EOS inside an accepted run -----------------------------------------------------------


def test_eos_inside_an_accepted_run(tiny, reply, tmp_path):
    # Same weights, but the reply's i-th token is also an EOS id: mlx-lm and the engine must
    # both end the reply right before it.
    i = next(i for i in range(4, K) if reply[i] not in reply[:i])
    eos_dir = shutil.copytree(tiny.path, tmp_path / "eos")
    generation = json.loads((eos_dir / "generation_config.json").read_text())
    generation["eos_token_id"] = [2, 0, reply[i]]
    (eos_dir / "generation_config.json").write_text(json.dumps(generation))

    model, tokenizer = mlx_load(str(eos_dir))
    expected, reason = TinyModel(eos_dir, model, tokenizer).greedy(PROMPT, 40)
    assert reason == "stop" and expected == reply[:i]  # mlx_lm.generate stops on it too

    [plain] = run_requests(eos_dir, [GenerationRequest(prompt_tokens=PROMPT, max_tokens=40)])
    # the draft holds the whole reply: EOS is the (i+1)-th of 8 accepted tokens
    [spec] = run_requests(
        eos_dir,
        [GenerationRequest(prompt_tokens=PROMPT, max_tokens=40, speculative=synthetic(reply))],
    )
    text, _ = tiny.text_ends(reply[:i])
    for out in (plain, spec):
        assert out.finished.finish_reason == FinishReason.STOP
        assert out.tokens == out.finished.token_ids == reply[:i]  # EOS itself is not emitted
        assert out.finished.text == "".join(out.deltas) == text
        assert out.finished.stats.generated_tokens == i
    assert spec.from_draft == [True] * i
    s = spec.finished.stats.spec
    assert s.rounds == 1 and s.target_forwards == 1
    assert s.emitted_tokens == i + 1  # the reply and the EOS that ended it


# -- 8. streamed UTF-8 -----------------------------------------------------------------------

MESSAGES = [
    "你好，世界 🌍🚀 数学",
    "写一首诗!!!",
    "Ünïcödé ñ 中文 🎉🎉!!!",
    "emoji 🐍🐍🐍 party!!!",
    "🚀",
]


def test_streamed_utf8_deltas_match_the_reply(tiny):
    requests = [
        GenerationRequest(messages=[{"role": "user", "content": m}], max_tokens=30)
        for m in MESSAGES
    ]
    outcomes = run_requests(tiny.path, requests)
    clean_non_ascii = 0
    for message, out in zip(MESSAGES, outcomes):
        decoded = tiny.tokenizer.decode(out.tokens)
        text = out.finished.text
        assert len(out.tokens) == 30, message
        assert "".join(out.deltas) == text, message
        assert same_text_as_decode(text, decoded), (message, text, decoded)
        if "\ufffd" not in decoded:  # a random model may emit invalid byte sequences
            assert all("\ufffd" not in d for d in out.deltas), (message, out.deltas)
            clean_non_ascii += any(ord(c) > 127 for c in text)
    assert clean_non_ascii > 0  # some reply streamed multi-byte characters


def test_text_stream_splits_no_character_with_the_real_detokenizer(tiny):
    text = "你好，世界 🌍🚀 数学 ñ"
    tokens = tiny.tokenizer.encode(text, add_special_tokens=False)
    assert any("\ufffd" in tiny.tokenizer.decode([t]) for t in tokens)  # split characters

    stream = TextStream(tiny.tokenizer.detokenizer)
    deltas = [stream.add(t) for t in tokens] + [stream.finish()]
    assert all("\ufffd" not in d for d in deltas)
    assert "".join(deltas) == stream.text == text

    stream = TextStream(tiny.tokenizer.detokenizer, stop=("🚀 数",))
    deltas = [stream.add(t) for t in tokens]
    assert stream.stopped
    deltas.append(stream.finish())
    assert all("\ufffd" not in d and "🚀" not in d for d in deltas)
    assert "".join(deltas) == stream.text == "你好，世界 🌍"
