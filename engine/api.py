"""The one door between the engine and everything else (the app, the benchmark, tests).

    engine = Engine(EngineConfig(model=None))      # None: the embedded default model
    engine.start()                                 # from inside a running asyncio loop
    info = await engine.wait_ready()
    async for event in engine.submit(GenerationRequest(messages=[...], model=None)):
        ...                                        # TokenEvent, StatsEvent, ... FinishedEvent
    engine.cancel(request_id); engine.stats(); await engine.stop()

Several models at once: a request names its model (and draft model); one that is not loaded is
loaded first (ModelLoadingEvent in that request's stream) while the others stream. Models can
also be loaded, unloaded and pinned by hand (`load_model`, `unload_model`, `pin_model`); nothing
cancels another request.

Only plain dataclasses from `engine.requests` cross this boundary; MLX arrays never do.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from engine.config import EngineConfig
from engine.engine_reports import EngineErrorEvent, EngineEvent, EngineStats, ModelInfo
from engine.hosting.model_pool import ModelBusy, ModelTooLarge
from engine.model_listing import ModelEntry as LocalModel
from engine.model_listing import list_local_models
from engine.models import ModelLoadError, validate_model_dir
from engine.requests import ErrorEvent, Event, FinishedEvent, GenerationRequest
from engine.speculative.mtp.checkpoint import mtp_weights_problem
from engine.validation import refusal
from engine.worker import EngineWorker

log = logging.getLogger(__name__)

__all__ = [
    "Engine",
    "EngineConfig",
    "EngineDied",
    "EngineNotStarted",
    "LocalModel",
    "mtp_weights_problem",
    "ModelBusy",
    "ModelLoadError",
    "ModelTooLarge",
    "list_local_models",
    "validate_model_dir",
]

DEFAULT_STOP_TIMEOUT_S = 30.0


class EngineNotStarted(RuntimeError):
    """The engine's thread is not running: call Engine.start()."""


class EngineDied(RuntimeError):
    """The engine's MLX thread ended unexpectedly; Engine.start() starts a new one."""


class Engine:
    """The engine for its callers: requests in, events out, models loaded as requests need."""

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
        self._ready = self._loop.create_future()
        self._worker.load(self.config.model, self._resolver(self._ready), configured=True)
        if self.config.draft_model:
            self._draft_ready = self._loop.create_future()
            self._worker.load(
                self.config.draft_model, self._resolver(self._draft_ready), configured_draft=True
            )

    async def wait_ready(self) -> ModelInfo:
        """The configured model's info once it is loaded (and the configured draft model's
        check passed); raises the loader's error (e.g. ModelLoadError)."""
        if self._ready is None:
            raise EngineNotStarted("call Engine.start() first")
        info = await asyncio.shield(self._ready)
        if self._draft_ready is not None:
            await asyncio.shield(self._draft_ready)
        return info

    async def load_model(self, model: str | None, *, pin: bool = False) -> ModelInfo:
        """Load a model (a folder, a repo id in the local HF cache, None: the configured one)
        next to the others, if it is not loaded yet; `pin` keeps it loaded. Idle models may
        be unloaded to make room; nothing running is cancelled. Raises ModelLoadError (with
        the model's size and the budget when it cannot fit)."""
        self._require_started()
        return await self._ask(lambda done: self._worker.load(model, done, pin=pin))

    async def set_default_model(self, model: str | None) -> None:
        """What requests that name no model use from now on (None: the embedded default
        model). Loads nothing and cancels nothing; raises ModelLoadError for a bad folder."""
        self._require_started()
        await self._ask(lambda done: self._worker.set_default(model, done))
        self.config = dataclasses.replace(self.config, model=model)

    async def unload_model(self, model: str | None) -> ModelInfo:
        """Unload a model (pinned or not) and free its memory; raises ModelBusy while requests
        use it, ModelLoadError when it is not loaded."""
        self._require_started()
        return await self._ask(lambda done: self._worker.unload(model, done))

    async def pin_model(self, model: str | None, pinned: bool = True) -> ModelInfo:
        """Pin a loaded model (never unloaded to make room for another) or unpin it."""
        self._require_started()
        return await self._ask(lambda done: self._worker.pin(model, pinned, done))

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
        self,
        messages: list[dict[str, str]],
        *,
        continue_reply: bool = False,
        model: str | None = None,
    ) -> int:
        """Prompt tokens these messages make with `model`'s chat template (None: the configured
        model); a model that is not loaded lends its tokenizer alone."""
        self._require_started()
        return await self._ask(
            lambda done: self._worker.count_tokens(messages, continue_reply, model, done)
        )

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
        return await self._ask(lambda done: self._worker.call(fn, done))

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

    async def _ask(self, post: Callable[[Callable], None]) -> Any:
        """Post a command to the MLX thread; its answer (or its error)."""
        future = self._loop.create_future()
        post(self._resolver(future))
        return await future

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
