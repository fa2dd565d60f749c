"""The one thread that owns every MLX call: models, caches and the scheduler loop.

Commands arrive on a queue; results leave as plain Python values through `deliver`, which the
API points at `loop.call_soon_threadsafe`. The thread blocks on its queue while idle.
"""

from __future__ import annotations

import copy
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine import blas
from engine.config import EngineConfig
from engine.requests import (
    EngineErrorEvent,
    EngineEvent,
    EngineStats,
    ErrorEvent,
    Event,
    FinishedEvent,
    GenerationRequest,
    LoadProgressEvent,
    ModelLoadedEvent,
)

log = logging.getLogger(__name__)

DEFAULT_IDLE_WAIT_S = 0.5
DEFAULT_RATE_WINDOW_S = 3.0
DEFAULT_STATS_PUBLISH_S = 0.1


@dataclass
class _Submit:
    request: GenerationRequest


@dataclass
class _Cancel:
    request_id: str


@dataclass
class _Load:
    model: str | None
    done: Callable[[Any, BaseException | None], None]


@dataclass
class _LoadDraft:
    model: str | None  # None unloads the draft model
    done: Callable[[Any, BaseException | None], None]


@dataclass
class _Stop:
    pass


@dataclass
class _Call:
    """Run a function on the MLX thread (tests, tools); its result goes to `done`."""

    fn: Callable[[], Any]
    done: Callable[[Any, BaseException | None], None]


@dataclass
class _Rate:
    samples: deque = field(default_factory=deque)

    def add(self, now: float, total: int) -> float:
        self.samples.append((now, total))
        while self.samples and now - self.samples[0][0] > DEFAULT_RATE_WINDOW_S:
            self.samples.popleft()
        t0, n0 = self.samples[0]
        return (total - n0) / (now - t0) if now > t0 else 0.0


class EngineWorker(threading.Thread):
    def __init__(
        self,
        config: EngineConfig,
        *,
        deliver: Callable[[list[Event]], None],
        announce: Callable[[EngineEvent], None],
    ) -> None:
        super().__init__(name="tandem-mlx", daemon=True)
        self.config = config
        self._deliver = deliver
        self._announce = announce
        self._commands: queue.Queue = queue.Queue()
        self._scheduler = None
        self._target = None
        self._stats = EngineStats(status="stopped")
        self._stats_lock = threading.Lock()
        self._rate = _Rate()
        self._prompt_cache = None  # engine.cache.PromptCache, made on this thread
        self._last_publish = 0.0

    # -- called from other threads -------------------------------------------------------------

    def post(self, command: object) -> None:
        self._commands.put(command)

    def submit(self, request: GenerationRequest) -> None:
        self.post(_Submit(request))

    def cancel(self, request_id: str) -> None:
        self.post(_Cancel(request_id))

    def load(self, model: str | None, done: Callable[[Any, BaseException | None], None]) -> None:
        self.post(_Load(model, done))

    def load_draft(
        self, model: str | None, done: Callable[[Any, BaseException | None], None]
    ) -> None:
        self.post(_LoadDraft(model, done))

    def call(self, fn: Callable[[], Any], done: Callable[[Any, BaseException | None], None]):
        self.post(_Call(fn, done))

    def stop(self) -> None:
        self.post(_Stop())

    def stats(self) -> EngineStats:
        with self._stats_lock:
            return copy.deepcopy(self._stats)

    # -- the thread ----------------------------------------------------------------------------

    def run(self) -> None:
        if self.config.log_blas:
            blas.log_blas()
        running = True
        while running:
            busy = self._scheduler is not None and self._scheduler.has_work()
            try:
                command = self._commands.get(block=not busy, timeout=DEFAULT_IDLE_WAIT_S)
            except queue.Empty:
                command = None
            while command is not None:
                running = self._handle(command)
                if not running:
                    break
                try:
                    command = self._commands.get_nowait()
                except queue.Empty:
                    command = None
            if running and self._scheduler is not None and self._scheduler.has_work():
                self._step()
            elif running:
                self._publish_stats(force=False)
            if running and self._prompt_cache is not None:  # its work between steps, bounded
                busy = self._scheduler is not None and self._scheduler.has_work()
                self._prompt_cache.tick(idle=not busy)
        self._drain_on_stop()

    def _handle(self, command: object) -> bool:
        if isinstance(command, _Stop):
            return False
        if isinstance(command, _Submit):
            if self._scheduler is None:
                self._deliver([ErrorEvent(command.request.request_id, "no model is loaded")])
            else:
                self._deliver(self._scheduler.add(command.request))
        elif isinstance(command, _Cancel):
            if self._scheduler is not None:
                self._scheduler.cancel(command.request_id)
        elif isinstance(command, _Load):
            self._load(command)
        elif isinstance(command, _LoadDraft):
            self._load_draft(command)
        elif isinstance(command, _Call):
            try:
                result = command.fn()
            except BaseException as exc:  # noqa: BLE001 - handed back to the caller
                command.done(None, exc)
            else:
                command.done(result, None)
        return True

    def _step(self) -> None:
        try:
            events = self._scheduler.step()
        except Exception as exc:  # noqa: BLE001 - the engine must survive a scheduler bug
            log.exception("scheduler step failed")
            self._announce(EngineErrorEvent(f"engine step failed: {exc}"))
            return
        if events:
            self._deliver(events)
        ended = any(isinstance(e, FinishedEvent | ErrorEvent) for e in events)
        self._publish_stats(force=ended)

    def _load(self, command: _Load) -> None:
        from engine.cache.kv_quant import KVQuant
        from engine.random_model import load_any as load_model
        from engine.scheduler import Scheduler, SchedulerConfig

        self._set_status("loading")
        if self._scheduler is not None:
            self._scheduler.cancel_all("the model is being switched")
            self._deliver(self._scheduler.step())

        def progress(message: str, fraction: float) -> None:
            self._announce(LoadProgressEvent(message, fraction))

        try:
            kv = KVQuant.of(self.config)  # bad settings fail the load with a clear message
            target = load_model(command.model, progress=progress)
            if kv is not None:
                kv.check_model(target.model)
        except Exception as exc:  # noqa: BLE001 - reported to the caller, engine keeps going
            log.warning("model load failed: %s", exc)
            self._set_status("error" if self._target is None else "ready", error=str(exc))
            self._announce(EngineErrorEvent(str(exc)))
            command.done(None, exc)
            return
        self._target = target
        self._scheduler = Scheduler(
            target,
            reuse=self._make_reuse(target),
            config=SchedulerConfig(
                prefill_chunk=self.config.prefill_chunk,
                max_batch=self.config.max_batch,
                max_context=self.config.max_context,
                kv_bits=self.config.kv_bits,
                kv_group_size=self.config.kv_group_size,
                kv_start=self.config.kv_start,
            ),
        )
        with self._stats_lock:
            self._stats.model = target.info
            self._stats.draft_model = None
            self._stats.status = "ready"
            self._stats.error = None
        self._announce(ModelLoadedEvent(target.info))
        command.done(target.info, None)

    def _make_reuse(self, target: Any) -> Any:
        if not self.config.prompt_cache:
            return None
        try:
            from engine.cache import PromptCache
            from engine.cache.kv_quant import KVQuant
            from engine.cache.reuse import PromptReuse

            if self._prompt_cache is None:
                self._prompt_cache = PromptCache.from_config(self.config)
            kv = KVQuant.of(self.config)
            return PromptReuse(self._prompt_cache, target, kv=kv)
        except Exception:  # noqa: BLE001 - the engine works without a prompt cache
            log.exception("prompt cache unavailable")
            return None

    def _load_draft(self, command: _LoadDraft) -> None:
        from engine.models import ModelLoadError, check_draft_compatible, load_model
        from engine.speculative.draft_model import DraftModelDrafter

        if self._scheduler is None:
            command.done(None, ModelLoadError("load a target model before a draft model"))
            return
        if command.model is None:
            self._scheduler.set_draft(None)
            with self._stats_lock:
                self._stats.draft_model = None
            command.done(None, None)
            return
        try:
            draft = load_model(command.model)
            check_draft_compatible(self._target, draft)
        except Exception as exc:  # noqa: BLE001 - reported to the caller, engine keeps going
            log.warning("draft model load failed: %s", exc)
            self._announce(EngineErrorEvent(str(exc)))
            command.done(None, exc)
            return
        self._scheduler.set_draft(DraftModelDrafter(draft))
        with self._stats_lock:
            self._stats.draft_model = draft.info
        self._announce(ModelLoadedEvent(self._target.info, draft.info))
        command.done(draft.info, None)

    def _set_status(self, status: str, *, error: str | None = None) -> None:
        with self._stats_lock:
            self._stats.status = status
            self._stats.error = error

    def _publish_stats(self, *, force: bool) -> None:
        now = time.perf_counter()
        if not force and now - self._last_publish < DEFAULT_STATS_PUBLISH_S:
            return
        self._last_publish = now
        s = self._scheduler
        if s is None:
            return
        running, waiting = s.counts()
        rate = self._rate.add(now, s.generated_tokens)
        with self._stats_lock:
            st = self._stats
            st.running, st.waiting = running, waiting
            st.batch_size = len(s.batch)
            st.steps = s.steps
            st.generated_tokens = s.generated_tokens
            st.tokens_per_s = rate if (running or waiting) else 0.0
            st.spec = s.spec_snapshot()
            if self._prompt_cache is not None:
                st.cache = self._prompt_cache.stats()
            st.blas = blas.info().name
            st.device = _device_name()

    def _drain_on_stop(self) -> None:
        if self._scheduler is not None:
            self._scheduler.cancel_all("the engine stopped")
            self._deliver(self._scheduler.step())
        if self._prompt_cache is not None:
            self._prompt_cache.close()  # finishes pending disk writes
        self._set_status("stopped")


def _device_name() -> str:
    import mlx.core as mx

    return str(mx.default_device())
