"""A stand-in for engine.api.Engine with the same surface the app uses: scripted replies streamed
with small delays, so widget and controller tests run in milliseconds without a model."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Callable

from engine.api import EngineConfig
from engine.requests import (
    CacheStats,
    EngineErrorEvent,
    EngineStats,
    ErrorEvent,
    Event,
    FinishedEvent,
    FinishReason,
    GenerationRequest,
    LoadProgressEvent,
    ModelInfo,
    ModelLoadedEvent,
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
        self.starts = 0
        self.draft_spec: str | None = None
        self._dead: str | None = None  # why the "MLX thread" died, until start() again
        self.requests: list[GenerationRequest] = []
        self.cancelled: list[str] = []
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

    async def load_draft_model(self, spec: str | None) -> ModelInfo | None:
        self.draft_spec = spec
        return FAKE_INFO if spec else None

    async def wait_ready(self) -> ModelInfo:
        return FAKE_INFO

    async def load_model(self, spec: str | None) -> ModelInfo:
        for listener in self._listeners:
            listener(LoadProgressEvent("loading", 0.5))
        if spec and "bad" in spec:
            raise RuntimeError(f"{spec} is not an MLX model folder: config.json is missing")
        for listener in self._listeners:
            listener(ModelLoadedEvent(FAKE_INFO))
        return FAKE_INFO

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
        return self._stats

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
            pieces = _pieces(self.reply)[: request.max_tokens]
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
                spec.target_forwards += 1
                spec.emitted_tokens += 1
                spec.forwards_saved += int(drafted)
                spec.accepted_by_position = [spec.accepted_tokens]
                spec.drafted_by_position = [spec.draft_tokens]
                yield TokenEvent(rid, [i], piece, [drafted])
                yield StatsEvent(rid, self._request_stats(i + 1, spec))
            reason = FinishReason.LENGTH if len(pieces) >= request.max_tokens else FinishReason.STOP
            finished = True
            self._stats.spec.add(spec)
            self._stats.spec_recent.add(spec)
            yield FinishedEvent(
                rid, reason, text, list(range(len(pieces))), self._request_stats(len(pieces), spec)
            )
        finally:
            self._active.discard(rid)
            if not finished:
                self.cancelled.append(rid)

    def _request_stats(self, tokens: int, spec: SpecStats) -> RequestStats:
        return RequestStats(
            prompt_tokens=10,
            generated_tokens=tokens,
            ttft_s=0.01,
            decode_tokens_per_s=50.0 + tokens,
            spec=copy.deepcopy(spec),
            context_tokens=10 + tokens,
            plain_tokens_per_s=self.plain_tokens_per_s,
            recent_acceptance=self.recent_acceptance,
            speculation_note=self.speculation_note,
        )


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
