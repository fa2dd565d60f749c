"""Shared pieces of the engine behaviour tests: a tiny random llama with mlx_lm.generate's
greedy replies, and helpers that run requests through the public Engine API."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field

from mlx_lm import load as mlx_load
from mlx_lm.generate import stream_generate

from engine.api import Engine, EngineConfig
from engine.bench.synthetic import SyntheticDrafter
from engine.core.engine_core import EngineCore
from engine.requests import (
    ErrorEvent,
    FinishedEvent,
    GenerationRequest,
    SamplingParams,
    SpecMethod,
    SpeculativeParams,
    TokenEvent,
)
from engine.speculative.auto import CostModel
from tests.tiny_models import make_tiny_llama_dir

VOCAB = 49152
TIMEOUT_S = 60.0  # no test here should come near this; it only turns a hang into a failure
DRIVER_TOKENS = 24  # a Driver request's default reply length
SEEDED = SamplingParams(temperature=0.8, top_p=0.9, seed=123)


def make_prompt(seed: int, length: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(100, VOCAB) for _ in range(length)]  # past the special tokens


P_A = make_prompt(1, 20)
P_B = make_prompt(2, 25)
P_C = make_prompt(3, 12)


@dataclass
class TinyModel:
    path: object
    model: object
    tokenizer: object
    _greedy: dict = field(default_factory=dict)

    def greedy(self, prompt: list[int], max_tokens: int) -> list[int]:
        """mlx_lm.generate's greedy reply (EOS dropped), cached per prompt."""
        key = (tuple(prompt), max_tokens)
        if key not in self._greedy:
            self._greedy[key] = [
                r.token
                for r in stream_generate(self.model, self.tokenizer, prompt, max_tokens=max_tokens)
                if not (r.finish_reason == "stop" and r.token in self.tokenizer.eos_token_ids)
            ]
        return self._greedy[key]


@dataclass
class Outcome:
    tokens: list[int] = field(default_factory=list)
    deltas: list[str] = field(default_factory=list)
    from_draft: list[bool] = field(default_factory=list)
    end: FinishedEvent | ErrorEvent | None = None

    @property
    def finished(self) -> FinishedEvent:
        assert isinstance(self.end, FinishedEvent), f"expected a FinishedEvent, got {self.end}"
        return self.end

    @property
    def error(self) -> ErrorEvent:
        assert isinstance(self.end, ErrorEvent), f"expected an ErrorEvent, got {self.end}"
        return self.end


async def collect(eng: Engine, request: GenerationRequest) -> Outcome:
    return await drain(eng.submit(request))


async def drain(stream) -> Outcome:
    out = Outcome()
    async for event in stream:
        assert out.end is None, "an event came after the stream's last one"
        if isinstance(event, TokenEvent):
            assert isinstance(event.text, str)
            assert len(event.from_draft) == len(event.token_ids)
            if event.token_ids:  # exact per-token text for highlighting drafts
                assert len(event.text_pieces) == len(event.token_ids)
                assert "".join(event.text_pieces) == event.text
            out.tokens += event.token_ids
            out.deltas.append(event.text)
            out.from_draft += event.from_draft
        elif isinstance(event, FinishedEvent | ErrorEvent):
            out.end = event
    assert out.end is not None
    if isinstance(out.end, FinishedEvent):
        assert out.end.token_ids == out.tokens
        assert "".join(out.deltas) == out.end.text
    return out


def with_engine(model_dir, body, **config):
    """Run `body(engine)` in a fresh loop with a started, ready engine; stop it afterwards."""

    async def main():
        config.setdefault("extra_drafters", SYNTH.entry())
        eng = Engine(EngineConfig(model=str(model_dir), log_blas=False, **config))
        eng.start()
        try:
            await asyncio.wait_for(eng.wait_ready(), TIMEOUT_S)
            return await asyncio.wait_for(body(eng), TIMEOUT_S)
        finally:
            await eng.stop()

    return asyncio.run(main())


async def wait_until(predicate, timeout_s: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.02)
    return predicate()


SYNTH = SyntheticDrafter(vocab_size=VOCAB)  # registered in every test engine


def synthetic(
    prompt: list[int], reference: list[int], acceptance: float, k: int
) -> SpeculativeParams:
    """Speculation by the synthetic drafter: rows with this prompt draft `reference` (their
    greedy reply), each token kept with probability `acceptance`."""
    SYNTH.expect(prompt, reference, acceptance)
    return SpeculativeParams(method=SpecMethod.SYNTHETIC, draft_tokens=k)


def make_tiny(folder) -> TinyModel:
    path = make_tiny_llama_dir(folder, tie_word_embeddings=False)
    model, tokenizer = mlx_load(str(path))
    return TinyModel(path, model, tokenizer)


def make_core(tiny, **config):
    """An EngineCore on the tiny model, stepped by the test itself (no thread, no asyncio)."""
    from engine.core.engine_core import EngineCore
    from engine.models import load_model

    loaded = load_model(str(tiny.path))
    config.setdefault("prefill_chunk", 16)
    config.setdefault("prompt_cache", False)
    config = EngineConfig(
        model=str(tiny.path),
        log_blas=False,
        extra_drafters=SYNTH.entry(),
        **config,
    )
    return EngineCore(loaded, config=config)


class Driver:
    """Steps an EngineCore, collecting each request's tokens and the batch's mode per step."""

    def __init__(self, core: EngineCore) -> None:
        self.core = core
        self.tokens: dict[str, list[int]] = {}
        self.modes: list[tuple[int, bool]] = []  # (rows in the batch, solo) after each step

    def add(self, prompt: list[int], max_tokens: int = DRIVER_TOKENS, **kwargs) -> str:
        request = GenerationRequest(prompt_tokens=prompt, max_tokens=max_tokens, **kwargs)
        self.tokens[request.request_id] = []
        self.core.add(request)
        return request.request_id

    def step(self) -> None:
        for event in self.core.step():
            if isinstance(event, ErrorEvent):
                raise AssertionError(event.message)
            if isinstance(event, TokenEvent):
                self.tokens[event.request_id].extend(event.token_ids)
        batch = self.core.executor.batch
        self.modes.append((len(batch), batch.solo))

    def until(self, predicate, limit: int = 400) -> None:
        for _ in range(limit):
            if predicate():
                return
            self.step()
        raise AssertionError("the engine never got there")

    def finish(self) -> None:
        self.until(lambda: not self.core.has_work())

    @property
    def batch(self):
        return self.core.executor.batch


def measure(costs: CostModel, batch: int, seconds: dict[int, float]) -> None:
    """Each width timed twice (a shape's first time is left out)."""
    for _ in range(2):
        for width, s in seconds.items():
            costs.record(batch, width, s)
