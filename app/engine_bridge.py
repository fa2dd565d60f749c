"""The engine as the Qt side sees it: engine-wide events become Qt signals, a QTimer polls the
engine's stats for the panel, and model loads run as tasks on the qasync loop.

Everything here runs on the GUI thread; MLX work happens on the engine's own thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from PySide6.QtCore import QObject, QTimer, Signal

from engine.api import Engine, EngineConfig
from engine.requests import (
    EngineErrorEvent,
    EngineEvent,
    EngineStats,
    Event,
    GenerationRequest,
    LoadProgressEvent,
    ModelInfo,
    ModelLoadedEvent,
)

log = logging.getLogger(__name__)

DEFAULT_STATS_POLL_MS = 250


class EngineBridge(QObject):
    """The engine for the GUI thread: its events as signals, its stats polled, its calls as tasks."""

    loadStarted = Signal(str)  # the model being loaded ("" for the default model)
    loadProgress = Signal(str, float)  # message, fraction 0..1 (-1: unknown)
    modelLoaded = Signal(object)  # ModelInfo
    loadFailed = Signal(str)  # a message for the user
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
        self.model_info: ModelInfo | None = None
        self.model_spec: str | None = self.engine.config.model
        self.draft_spec: str | None = self.engine.config.draft_model
        self.last_error: str | None = None
        self.loading = False
        self._stats = EngineStats()
        self._tasks: set[asyncio.Task] = set()
        self._timer = QTimer(self)
        self._timer.setInterval(poll_ms)
        self._timer.timeout.connect(self.poll_stats)

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
        """Start the engine's MLX thread again after it died, with the model the user had."""
        self.model_info = None
        self.draft_spec = None  # the next reply that needs its draft model loads it again
        self.start()

    async def _await_first_load(self) -> None:
        stats = self.engine.stats()
        if stats.status == "ready" and stats.model is not None:
            # already running (shared) with a model: a later failed load does not unload it
            self._loaded(stats.model)
            return
        try:
            info = await self.engine.wait_ready()
            if self.model_spec != self.engine.config.model:
                # restarted: the engine began with its configured model, the user had switched
                info = await self.engine.load_model(self.model_spec)
        except Exception as exc:  # noqa: BLE001 - shown to the user
            self._failed(exc)
        else:
            self._loaded(info)

    async def load_model(self, spec: str | None) -> ModelInfo:
        """Switch the engine to `spec` (a folder, a repo id, or None for the default model).
        Running replies are cancelled by the engine. Raises the loader's error."""
        self.loading = True
        self.loadStarted.emit(spec or "")
        try:
            info = await self.engine.load_model(spec)
        except Exception as exc:
            self._failed(exc)
            raise
        self.model_spec = spec
        self._loaded(info)
        return info

    async def load_draft_model(self, spec: str | None) -> ModelInfo | None:
        """Load (None: unload) the engine's draft model; raises the engine's refusal (e.g. a
        vocabulary that differs from the target's)."""
        info = await self.engine.load_draft_model(spec)
        self.draft_spec = spec
        return info

    def request_load(self, spec: str | None) -> None:
        """Fire-and-forget `load_model` (signals report the outcome)."""

        async def run() -> None:
            try:
                await self.load_model(spec)
            except Exception:  # noqa: BLE001 - already reported through loadFailed
                pass

        self.loading = True  # from now on, not only once the task runs
        self._spawn(run())

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
        """Close the bridge and stop the engine."""
        self.close()
        await self.engine.stop()

    # -- requests and stats --------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        return self.model_info is not None and not self.loading

    def submit(self, request: GenerationRequest) -> AsyncIterator[Event]:
        return self.engine.submit(request)

    def cancel(self, request_id: str) -> None:
        self.engine.cancel(request_id)

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

    def _loaded(self, info: ModelInfo) -> None:
        self.loading = False
        self.model_info = info
        self.last_error = None
        self.modelLoaded.emit(info)

    def _failed(self, exc: BaseException) -> None:
        self.loading = False
        self.last_error = str(exc) or type(exc).__name__
        log.warning("model load failed: %s", self.last_error)
        self.loadFailed.emit(self.last_error)

    def _engine_event(self, event: EngineEvent) -> None:
        if isinstance(event, LoadProgressEvent):
            self.loadProgress.emit(event.message, event.fraction)
        elif isinstance(event, ModelLoadedEvent):
            pass  # reported through the load's own result, with the spec that asked for it
        elif isinstance(event, EngineErrorEvent):
            if event.fatal:
                self.loading = False
                self.last_error = event.message
                self.engineFailed.emit(event.message)
            elif not self.loading:
                self.engineError.emit(event.message)
