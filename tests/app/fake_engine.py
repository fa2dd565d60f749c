"""A stand-in for engine.api.Engine with the same surface the app uses: scripted replies streamed
with small delays, so widget and controller tests run in milliseconds without a model."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Callable
from dataclasses import replace

from engine.api import EngineConfig
from engine.engine_reports import (
    CacheStats,
    EngineErrorEvent,
    EngineStats,
    LoadProgressEvent,
    ModelInfo,
    ModelLoadedEvent,
    ModelStats,
    ModelUnloadedEvent,
)
from engine.requests import (
    ErrorEvent,
    Event,
    FinishedEvent,
    FinishReason,
    GenerationRequest,
    ModelLoadingEvent,
    PrefillProgressEvent,
    RequestStats,
    SpecStats,
    StatsEvent,
    TokenEvent,
)

FAKE_INFO = ModelInfo(
    name="fake-model",
    path="/fake/model",
    architecture="llama",
    parameters=1000,
    bytes=4000,
    vocab_size=100,
    context_length=2048,
    dtype="float32",
)
FAKE_DISK_CACHE_BYTES = 3_500_000
FAKE_BUDGET = 16 << 30
DEFAULT_REPLY = "Hello! Here is `code`:\n\n```python\nprint('hi')\n```\n\nDone."


class FakeEngine:
    def __init__(self, *, reply: str = DEFAULT_REPLY, token_delay_s: float = 0.01) -> None:
        self.config = EngineConfig(model=None)
        self.reply = reply
        self.token_delay_s = token_delay_s
        self.fail_with: str | None = None  # the next request ends with this ErrorEvent
        # what every RequestStats this engine sends says of plain speed and recent acceptance
        self.plain_tokens_per_s: float | None = None
        self.recent_acceptance: float | None = None
        self.speculation_note: str | None = None
        self.prompt_cache_note: str | None = None
        self.starts = 0
        self.loaded: dict[str, ModelStats] = {}  # other models than the default, by spec
        self._dead: str | None = None  # why the "MLX thread" died, until start() again
        self.requests: list[GenerationRequest] = []
        self.cancelled: list[str] = []
        self.counted = 0  # count_tokens calls
        self._listeners: list[Callable] = []
        self._running = False
        self._active: set[str] = set()
        self._stats = EngineStats(status="stopped")

    @property
    def running(self) -> bool:
        return self._running

    def start(self) -> None:
        asyncio.get_running_loop()
        self._running = True
        self._dead = None
        self.starts += 1
        self._stats = EngineStats(
            status="ready", model=FAKE_INFO, cache=CacheStats(disk_bytes=FAKE_DISK_CACHE_BYTES)
        )

    def die(self, message: str = "the MLX thread died: out of memory") -> None:
        """What a crash of the engine's MLX thread looks like from outside (fatal=True)."""
        self._dead = message
        self._running = False
        self._stats.status = "error"
        for listener in list(self._listeners):
            listener(EngineErrorEvent(message, fatal=True))

    async def clear_prompt_cache(self) -> int:
        freed, self._stats.cache.disk_bytes = self._stats.cache.disk_bytes, 0
        return freed

    async def wait_ready(self) -> ModelInfo:
        return FAKE_INFO

    async def set_default_model(self, spec: str | None) -> None:
        if spec and "bad" in spec:
            raise RuntimeError(f"{spec} is not an MLX model folder: config.json is missing")
        self.config = EngineConfig(model=spec)

    async def load_model(self, spec: str | None, *, pin: bool = False) -> ModelInfo:
        self._announce(LoadProgressEvent("loading", 0.5, model=fake_name(spec)))
        if spec and "bad" in spec:
            raise RuntimeError(f"{spec} is not an MLX model folder: config.json is missing")
        info = self._hold(spec)
        self._announce(ModelLoadedEvent(info))
        if spec in self.loaded:
            self.loaded[spec].pinned = self.loaded[spec].pinned or pin
        return info

    async def unload_model(self, spec: str | None) -> ModelInfo:
        held = self.loaded.get(spec)
        if held is None:
            raise RuntimeError("that model is not loaded")
        if self._using(spec):
            raise RuntimeError(f"{held.name} is in use: unload it once its replies have finished")
        del self.loaded[spec]
        self._announce(ModelUnloadedEvent(held.info, "unloaded by hand"))
        return held.info

    async def pin_model(self, spec: str | None, pinned: bool = True) -> ModelInfo:
        self.loaded[spec].pinned = pinned
        return self.loaded[spec].info

    def default_info(self) -> ModelInfo:
        spec = self.config.model
        return FAKE_INFO if spec is None else replace(FAKE_INFO, name=fake_name(spec), path=spec)

    def _hold(self, spec: str | None) -> ModelInfo:
        """The model `spec` names, held from now on (the default model always is)."""
        if spec is None or spec == self.config.model:
            return self.default_info()
        if spec not in self.loaded:
            info = replace(FAKE_INFO, name=fake_name(spec), path=spec)
            self.loaded[spec] = ModelStats(
                key=spec, name=info.name, info=info, specs=[spec], weights_bytes=info.bytes
            )
        return self.loaded[spec].info

    def _using(self, spec: str | None) -> list[str]:
        return [
            r.request_id for r in self.requests if r.request_id in self._active and r.model == spec
        ]

    def _announce(self, event) -> None:
        for listener in list(self._listeners):
            listener(event)

    async def stop(self) -> None:
        self._running = False

    def add_listener(self, listener: Callable) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def stats(self) -> EngineStats:
        self._stats.running = len(self._active)
        self._stats.batch_size = len(self._active)
        info = self.default_info()
        default = ModelStats(
            key=info.path,
            name=info.name,
            info=info,
            specs=[""],
            configured=True,
            weights_bytes=info.bytes,
            request_ids=self._using(None),
        )
        for spec, held in self.loaded.items():
            held.request_ids = self._using(spec)
        self._stats.models = [default, *self.loaded.values()] if self._running else []
        self._stats.memory_used_bytes = sum(m.memory_bytes for m in self._stats.models)
        self._stats.memory_budget_bytes = FAKE_BUDGET
        return self._stats

    async def count_tokens(
        self,
        messages: list[dict[str, str]],
        *,
        continue_reply: bool = False,
        model: str | None = None,
    ) -> int:
        self.counted += 1
        return fake_count(messages, continue_reply=continue_reply)

    def cancel(self, request_id: str) -> None:
        self.cancelled.append(request_id)

    def submit(self, request: GenerationRequest) -> AsyncIterator[Event]:
        self.requests.append(request)
        return self._stream(request)

    async def _stream(self, request: GenerationRequest) -> AsyncIterator[Event]:
        rid = request.request_id
        self._active.add(rid)
        finished = False
        try:
            if request.model is not None and request.model not in self.loaded:
                name = fake_name(request.model)
                for fraction in (0.0, 0.5):
                    await asyncio.sleep(self.token_delay_s)
                    yield ModelLoadingEvent(rid, name, "Reading weights", fraction)
                self._announce(ModelLoadedEvent(self._hold(request.model)))
            yield PrefillProgressEvent(rid, 10, 10)
            if self._dead or not self._running:
                finished = True
                yield ErrorEvent(rid, self._dead or "the engine is not running")
                return
            if self.fail_with:
                message, self.fail_with = self.fail_with, None
                finished = True
                yield ErrorEvent(rid, message)
                return
            pieces = _pieces(self.reply)
            prompt = fake_count(request.messages, continue_reply=request.continue_reply)
            cached = 0
            if request.continue_reply:  # the rest of the scripted reply, from the prompt cache
                pieces = pieces[len(_pieces(request.messages[-1]["content"])) :]
                cached = prompt - 1
            pieces = pieces[: request.max_tokens]
            text = ""
            spec = SpecStats()
            for i, piece in enumerate(pieces):
                await asyncio.sleep(self.token_delay_s)
                if self._dead:
                    finished = True
                    yield ErrorEvent(rid, self._dead)
                    return
                drafted = i % 3 != 0
                text += piece
                spec.draft_tokens += 1
                spec.accepted_tokens += int(drafted)
                spec.rounds += 1
                spec.ahead_rounds += int(i % 2 == 0)  # half the rounds queued ahead
                kind = "head" if i % 4 == 3 else "lookup"  # as an auto chat with a head drafts
                spec.rounds_by_drafter[kind] = spec.rounds_by_drafter.get(kind, 0) + 1
                spec.target_forwards += 1
                spec.emitted_tokens += 1
                spec.forwards_saved += int(drafted)
                spec.accepted_by_position = [spec.accepted_tokens]
                spec.drafted_by_position = [spec.draft_tokens]
                yield TokenEvent(rid, [i], piece, [drafted], [piece])
                yield StatsEvent(rid, self._request_stats(i + 1, spec, prompt, cached))
            reason = FinishReason.LENGTH if len(pieces) >= request.max_tokens else FinishReason.STOP
            finished = True
            self._stats.spec.add(spec)
            self._stats.spec_recent.add(spec)
            stats = self._request_stats(len(pieces), spec, prompt, cached)
            yield FinishedEvent(rid, reason, text, list(range(len(pieces))), stats)
        finally:
            self._active.discard(rid)
            if not finished:
                self.cancelled.append(rid)

    def _request_stats(
        self, tokens: int, spec: SpecStats, prompt: int, cached: int = 0
    ) -> RequestStats:
        return RequestStats(
            prompt_tokens=prompt,
            cached_tokens=cached,
            generated_tokens=tokens,
            ttft_s=0.01,
            decode_tokens_per_s=50.0 + tokens,
            spec=copy.deepcopy(spec),
            context_tokens=prompt + tokens,
            plain_tokens_per_s=self.plain_tokens_per_s,
            recent_acceptance=self.recent_acceptance,
            speculation_note=self.speculation_note,
            prompt_cache_note=self.prompt_cache_note,
        )


def fake_name(spec: str | None) -> str:
    return FAKE_INFO.name if spec is None else spec.rstrip("/").rsplit("/", 1)[-1]


def fake_count(messages: list[dict[str, str]], *, continue_reply: bool = False) -> int:
    """The fake chat template: one token per word, four around each message, two at the end."""
    tokens = sum(len(_pieces(m["content"])) + 4 for m in messages)
    return tokens - 3 if continue_reply else tokens + 2


def _pieces(text: str) -> list[str]:
    out, word = [], ""
    for ch in text:
        word += ch
        if ch in " \n":
            out.append(word)
            word = ""
    if word:
        out.append(word)
    return out
