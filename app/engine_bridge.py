"""The engine as the Qt side sees it: engine-wide events become Qt signals, a QTimer polls the
engine's stats for the panel, and model loads, unloads and pins run as tasks on the qasync loop.

The engine holds several models at once; each request names its own (None: the engine's
default model, which `model_info` describes). Everything here runs on the GUI thread; MLX work
happens on the engine's own thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable

from PySide6.QtCore import QObject, QTimer, Signal

from app.models.model_catalog import BUILT_IN_SPEC
from app.remote.remote_backend import RemoteBackend
from app.remote.remote_spec import is_remote, parse_remote
from engine.api import Engine, EngineConfig
from engine.engine_reports import (
    EngineErrorEvent,
    EngineEvent,
    EngineStats,
    LoadProgressEvent,
    ModelInfo,
    ModelLoadedEvent,
    ModelStats,
    ModelUnloadedEvent,
)
from engine.requests import ErrorEvent, Event, GenerationRequest

log = logging.getLogger(__name__)

DEFAULT_STATS_POLL_MS = 250


class EngineBridge(QObject):
    """The engine for the GUI thread: its events as signals, its stats polled, its calls as tasks."""

    loadStarted = Signal(str)  # a model being loaded by hand or as the default ("": built in)
    loadProgress = Signal(str, float)  # message, fraction 0..1 (-1: unknown), any model
    modelLoaded = Signal(object)  # ModelInfo: the default model is ready
    modelAdded = Signal(object)  # ModelInfo: any model finished loading
    modelRemoved = Signal(object, str)  # ModelInfo, why: a model was unloaded
    loadFailed = Signal(str)  # a load the user asked for failed: a message for the user
    actionFailed = Signal(str)  # an unload or pin was refused: a message for the user
    engineError = Signal(str)
    engineFailed = Signal(str)  # the MLX thread died; every reply ended; `restart()` recovers
    statsUpdated = Signal(object)  # EngineStats

    def __init__(
        self,
        engine: Engine | None = None,
        *,
        config: EngineConfig | None = None,
        poll_ms: int = DEFAULT_STATS_POLL_MS,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.engine = engine or Engine(config or EngineConfig())
        self.engine.add_listener(self._engine_event)
        self.model_info: ModelInfo | None = None  # the default model's, once loaded
        self.last_error: str | None = None
        self.loading = False  # the default model is loading
        self.loads: set[str] = set()  # specs loading by hand ("" for the built-in model)
        self.remote: RemoteBackend | None = None  # chats whose model is a "remote:" spec
        self._stats = EngineStats()
        self._tasks: set[asyncio.Task] = set()
        self._timer = QTimer(self)
        self._timer.setInterval(poll_ms)
        self._timer.timeout.connect(self.poll_stats)

    @property
    def model_spec(self) -> str | None:
        """The default model: what a chat set to "Default model" runs on."""
        return self.engine.config.model

    # -- life cycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the engine (from inside the running qasync loop) and report the first load."""
        if not self.engine.running:
            self.engine.start()
        self._timer.start()
        self.loading = True
        self.loadStarted.emit(self.model_spec or "")
        self._spawn(self._await_first_load())

    def restart(self) -> None:
        """Start the engine's MLX thread again after it died (with the default model)."""
        self.model_info = None
        self.start()

    async def _await_first_load(self) -> None:
        stats = self.engine.stats()
        if stats.status == "ready" and stats.model is not None:
            self._default_ready(stats.model)  # already running (shared) with its model
            return
        try:
            info = await self.engine.wait_ready()
        except Exception as exc:  # noqa: BLE001 - shown to the user
            self._failed(exc)
        else:
            self._default_ready(info)

    async def use_default(self, spec: str | None) -> ModelInfo:
        """Make `spec` the default model and load it; nothing running is cancelled. Raises
        the loader's error."""
        self.loading = True
        self.loadStarted.emit(spec or "")
        try:
            await self.engine.set_default_model(spec)
            info = await self.engine.load_model(spec)
        except Exception as exc:
            self._failed(exc)
            raise
        self._default_ready(info)
        return info

    def request_default(self, spec: str | None) -> None:
        """Fire-and-forget `use_default` (signals report the outcome)."""
        self.loading = True  # from now on, not only once the task runs
        self._spawn(_quietly(self.use_default(spec)))

    # -- models by hand ------------------------------------------------------------------------

    async def load_model(self, spec: str | None, *, pin: bool = False) -> ModelInfo:
        """Load a model next to the others (None: the default model); raises the loader's
        error, e.g. that it does not fit in the memory budget."""
        key = spec or ""
        self.loads.add(key)
        self.loadStarted.emit(key)
        try:
            info = await self.engine.load_model(spec, pin=pin)
        except Exception as exc:
            self.loads.discard(key)
            self._failed(exc, default=False)
            raise
        self.loads.discard(key)
        self.poll_stats()
        return info

    def request_load(self, spec: str | None, *, pin: bool = False) -> None:
        """Fire-and-forget `load_model` (signals report the outcome)."""
        self._spawn(_quietly(self.load_model(spec, pin=pin)))

    def request_unload(self, spec: str | None) -> None:
        """Unload a model (refused, with actionFailed, while chats use it)."""
        self._spawn(self._act(self.engine.unload_model(spec)))

    def request_pin(self, spec: str | None, pinned: bool) -> None:
        self._spawn(self._act(self.engine.pin_model(spec, pinned)))

    async def _act(self, call: Awaitable) -> None:
        try:
            await call
        except Exception as exc:  # noqa: BLE001 - shown to the user
            self.actionFailed.emit(str(exc) or type(exc).__name__)
        self.poll_stats()

    def models(self) -> list[ModelStats]:
        """The models the engine holds or is loading (from the last stats poll)."""
        return list(self._stats.models)

    def model_for(self, spec: str | None) -> ModelStats | None:
        """The held model a chat's model setting names (None: the default model)."""
        for model in self._stats.models:
            if spec is None and model.configured:
                return model
            if spec is not None and (spec in model.specs or spec == model.key):
                return model
        return None

    def name_for(self, spec: str | None) -> str:
        """What to call the model a chat's setting names, loaded or not."""
        if spec is None and self.model_info is not None:
            return self.model_info.name
        if is_remote(spec):
            server_id, model = parse_remote(spec)
            server = self.remote.registry.get(server_id) if self.remote else None
            return f"{model} on {server.name}" if server else f"{model} (a removed server)"
        held = self.model_for(spec)
        if held is not None:
            return held.name
        if spec is None:
            return "the default model"
        if spec == BUILT_IN_SPEC:
            return "the built-in model"
        text = spec.rstrip("/\\").replace("\\", "/")
        return (
            text
            if text.count("/") == 1 and not text.startswith(("/", ".", "~"))
            else (text.rsplit("/", 1)[-1])
        )

    def context_length(self, spec: str | None) -> int | None:
        """The context length of the model a chat names, when it is loaded."""
        held = self.model_for(spec)
        if held is not None and held.info is not None:
            return held.info.context_length
        return self.model_info.context_length if spec is None and self.model_info else None

    async def clear_prompt_cache(self) -> int:
        """Empty the prompt cache (RAM and disk); returns the bytes freed."""
        freed = await self.engine.clear_prompt_cache()
        self.poll_stats()
        return freed

    def close(self) -> None:
        """Stop polling and listening; the engine keeps running (it may be shared)."""
        self._timer.stop()
        self.engine.remove_listener(self._engine_event)
        for task in list(self._tasks):
            task.cancel()

    async def stop(self) -> None:
        """Close the bridge (and remote connections) and stop the engine."""
        self.close()
        if self.remote is not None:
            await self.remote.close()
        await self.engine.stop()

    # -- requests and stats --------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        return self.model_info is not None and not self.loading

    def submit(self, request: GenerationRequest) -> AsyncIterator[Event]:
        """The engine's events for `request`; a "remote:" model's come from its server."""
        if is_remote(request.model):
            if self.remote is None:
                return _single(ErrorEvent(request.request_id, "remote servers are not set up"))
            return self.remote.submit(request)
        return self.engine.submit(request)

    def cancel(self, request_id: str) -> None:
        self.engine.cancel(request_id)

    async def count_tokens(
        self, messages: list[dict[str, str]], *, model: str | None = None
    ) -> int:
        if is_remote(model):  # the server's tokenizer is not here: the meter says "unknown"
            raise LookupError("a remote model's tokens cannot be counted here")
        return await self.engine.count_tokens(messages, model=model)

    def stats(self) -> EngineStats:
        return self._stats

    def poll_stats(self) -> EngineStats:
        self._stats = self.engine.stats()
        self.statsUpdated.emit(self._stats)
        return self._stats

    # -- internals -----------------------------------------------------------------------------

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _default_ready(self, info: ModelInfo) -> None:
        self.loading = False
        self.model_info = info
        self.last_error = None
        self.poll_stats()
        self.modelLoaded.emit(info)

    def _failed(self, exc: BaseException, *, default: bool = True) -> None:
        if default:
            self.loading = False
        self.last_error = str(exc) or type(exc).__name__
        log.warning("model load failed: %s", self.last_error)
        self.loadFailed.emit(self.last_error)

    def _engine_event(self, event: EngineEvent) -> None:
        if isinstance(event, LoadProgressEvent):
            self.loadProgress.emit(event.message, event.fraction)
        elif isinstance(event, ModelLoadedEvent):
            self.modelAdded.emit(event.model)
        elif isinstance(event, ModelUnloadedEvent):
            self.modelRemoved.emit(event.model, event.reason)
        elif isinstance(event, EngineErrorEvent):
            if event.fatal:
                self.loading = False
                self.last_error = event.message
                self.engineFailed.emit(event.message)
            elif not self.loading:
                self.engineError.emit(event.message)


async def _single(event: Event) -> AsyncIterator[Event]:
    yield event


async def _quietly(call: Awaitable) -> None:
    """Await a call whose failure the bridge already reported through a signal."""
    try:
        await call
    except Exception:  # noqa: BLE001 - reported through loadFailed
        pass
