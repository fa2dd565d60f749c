"""The one door between the engine and everything else (the app, the benchmark, tests).

    engine = Engine(EngineConfig(model=None))      # None: the embedded default model
    engine.start()                                 # from inside a running asyncio loop
    info = await engine.wait_ready()
    async for event in engine.submit(GenerationRequest(messages=[...])):
        ...                                        # TokenEvent, StatsEvent, ... FinishedEvent
    engine.cancel(request_id); engine.stats(); await engine.stop()

Only plain dataclasses from `engine.requests` cross this boundary; MLX arrays never do.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from engine.config import EngineConfig
from engine.requests import (
    EngineErrorEvent,
    EngineEvent,
    EngineStats,
    ErrorEvent,
    Event,
    FinishedEvent,
    GenerationRequest,
    ModelInfo,
)
from engine.validation import refusal
from engine.worker import EngineWorker

log = logging.getLogger(__name__)

DEFAULT_STOP_TIMEOUT_S = 30.0


class EngineNotStarted(RuntimeError):
    """The engine's thread is not running: call Engine.start()."""


class EngineDied(RuntimeError):
    """The engine's MLX thread ended unexpectedly; Engine.start() starts a new one."""


class Engine:
    def __init__(self, config: EngineConfig | None = None) -> None:
        self.config = config or EngineConfig()
        self._worker: EngineWorker | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._streams: dict[str, asyncio.Queue] = {}
        self._listeners: list[Callable[[EngineEvent], None]] = []
        self._ready: asyncio.Future | None = None
        self._draft_ready: asyncio.Future | None = None
        self._pending: set[asyncio.Future] = set()  # answers the MLX thread still owes

    # -- life cycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the MLX thread and begin loading the configured model (again, after the thread
        died: see `EngineErrorEvent.fatal`)."""
        if self._worker is not None and self._worker.is_alive():
            return
        self._worker = None
        self._loop = asyncio.get_running_loop()
        self._worker = EngineWorker(
            self.config,
            deliver=self._deliver_threadsafe,
            announce=self._announce_threadsafe,
            died=self._died_threadsafe,
        )
        self._worker.start()
        self._ready = self._post_load(self.config.model)
        if self.config.draft_model:
            self._draft_ready = self._loop.create_future()
            self._worker.load_draft(self.config.draft_model, self._resolver(self._draft_ready))

    async def wait_ready(self) -> ModelInfo:
        """The loaded model's info; raises the loader's error (e.g. ModelLoadError)."""
        if self._ready is None:
            raise EngineNotStarted("call Engine.start() first")
        info = await asyncio.shield(self._ready)
        if self._draft_ready is not None:
            await asyncio.shield(self._draft_ready)
        return info

    async def load_model(self, model: str | None) -> ModelInfo:
        """Switch models; running requests are cancelled. Raises on a bad model."""
        self._require_started()
        self._ready = self._post_load(model)
        return await asyncio.shield(self._ready)

    async def load_draft_model(self, model: str | None) -> ModelInfo | None:
        """Load (or with None, unload) the draft model. Refused with a clear error when its
        vocabulary differs from the target's. It serves requests admitted after the running
        ones finish, since its cache must hold every running row."""
        self._require_started()
        future = self._loop.create_future()
        self._worker.load_draft(model, self._resolver(future))
        return await future

    async def stop(self, timeout: float = DEFAULT_STOP_TIMEOUT_S) -> None:
        if self._worker is None:
            return
        worker, self._worker = self._worker, None
        worker.stop()
        await asyncio.get_running_loop().run_in_executor(None, worker.join, timeout)
        for request_id, stream in list(self._streams.items()):
            stream.put_nowait(ErrorEvent(request_id, "the engine stopped"))
        self._streams.clear()

    @property
    def running(self) -> bool:
        """True while the MLX thread is alive (False before start, after stop, or if it died)."""
        return self._worker is not None and self._worker.is_alive()

    # -- requests ------------------------------------------------------------------------------

    def submit(self, request: GenerationRequest) -> AsyncIterator[Event]:
        """Queue a request; iterate the result for its events. Closing the iterator early
        (break, task cancelled) cancels the request. A request with a bad field never reaches
        the engine thread: its stream yields one ErrorEvent naming the field."""
        self._require_started()
        refused = refusal(request)
        if refused is not None:
            return _single(refused)
        if request.request_id in self._streams:
            raise ValueError(f"request id {request.request_id} is already running")
        stream: asyncio.Queue = asyncio.Queue()
        self._streams[request.request_id] = stream
        self._worker.submit(request)
        return self._events(request.request_id, stream)

    async def generate(self, request: GenerationRequest) -> FinishedEvent:
        """Run a request to the end; raises RuntimeError with the message on an error."""
        async for event in self.submit(request):
            if isinstance(event, FinishedEvent):
                return event
            if isinstance(event, ErrorEvent):
                raise RuntimeError(event.message)
        raise RuntimeError("the request ended without a result")

    def cancel(self, request_id: str) -> None:
        if self._worker is not None and request_id in self._streams:
            self._worker.cancel(request_id)

    async def count_tokens(
        self, messages: list[dict[str, str]], *, continue_reply: bool = False
    ) -> int:
        """Prompt tokens these messages make with the loaded model's chat template."""
        from engine.prompt import apply_chat_template

        def count(loaded: Any) -> int:
            ids = apply_chat_template(messages, loaded.tokenizer, continue_reply=continue_reply)
            return len(ids)

        return await self.run_on_engine_thread(lambda: count(self._worker.target))

    async def clear_prompt_cache(self) -> int:
        """Empty the prompt cache (RAM and disk); returns the bytes freed."""
        return await self.run_on_engine_thread(self._worker.clear_prompt_cache)

    def stats(self) -> EngineStats:
        if self._worker is None:
            return EngineStats(status="stopped")
        return self._worker.stats()

    def add_listener(self, listener: Callable[[EngineEvent], None]) -> None:
        """Call `listener` on the event loop for engine-wide events (loading, errors)."""
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[EngineEvent], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    async def run_on_engine_thread(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` on the MLX thread (for tools and tests); return what it returns."""
        self._require_started()
        future = self._loop.create_future()
        self._worker.call(fn, self._resolver(future))
        return await future

    # -- internals -----------------------------------------------------------------------------

    async def _events(self, request_id: str, stream: asyncio.Queue) -> AsyncIterator[Event]:
        finished = False
        try:
            while True:
                event = await stream.get()
                yield event
                if isinstance(event, FinishedEvent | ErrorEvent):
                    finished = True
                    return
        finally:
            self._streams.pop(request_id, None)
            if not finished and self._worker is not None:
                self._worker.cancel(request_id)

    def _post_load(self, model: str | None) -> asyncio.Future:
        future = self._loop.create_future()
        self._worker.load(model, self._resolver(future))
        return future

    def _resolver(self, future: asyncio.Future) -> Callable[[Any, BaseException | None], None]:
        self._pending.add(future)

        def done(result: Any, error: BaseException | None) -> None:
            def settle() -> None:
                self._pending.discard(future)
                if future.done():
                    return
                if error is not None:
                    future.set_exception(error)
                else:
                    future.set_result(result)

            self._loop.call_soon_threadsafe(settle)

        return done

    def _deliver_threadsafe(self, events: list[Event]) -> None:
        if events and self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._dispatch, events)

    def _dispatch(self, events: list[Event]) -> None:
        for event in events:
            stream = self._streams.get(event.request_id)
            if stream is not None:
                stream.put_nowait(event)

    def _died_threadsafe(self, message: str) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._died, message)

    def _died(self, message: str) -> None:
        """The MLX thread ended without being asked: end every stream and waiting future."""
        log.error("the engine thread died: %s", message)
        for request_id, stream in list(self._streams.items()):
            stream.put_nowait(ErrorEvent(request_id, f"the engine stopped: {message}"))
        pending, self._pending = self._pending, set()
        for future in pending | {self._ready, self._draft_ready}:
            if future is not None and not future.done():
                future.set_exception(EngineDied(message))
        self._notify(EngineErrorEvent(f"the engine stopped: {message}", fatal=True))

    def _announce_threadsafe(self, event: EngineEvent) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._notify, event)

    def _notify(self, event: EngineEvent) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # noqa: BLE001 - a listener's bug must not stop the others
                log.exception("engine listener failed")

    def _require_started(self) -> None:
        if not self.running:
            raise EngineNotStarted("the engine is not running: call Engine.start() first")


async def _single(event: Event) -> AsyncIterator[Event]:
    yield event
