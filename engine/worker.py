"""The one thread that owns every MLX call: models, caches and the engine's step loop.

Commands arrive on a queue; results leave as plain Python values through `deliver`, which the
API points at `loop.call_soon_threadsafe`. The thread blocks on its queue while idle. If it ever
dies, `died` says why, so that nothing waits for it forever.
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
from engine.speculative.metrics import RecentTotals

log = logging.getLogger(__name__)

DEFAULT_IDLE_WAIT_S = 0.5
DEFAULT_RATE_WINDOW_S = 3.0
DEFAULT_STATS_PUBLISH_S = 0.1

Done = Callable[[Any, BaseException | None], None]


@dataclass
class _Submit:
    request: GenerationRequest


@dataclass
class _Cancel:
    request_id: str


@dataclass
class _Load:
    model: str | None
    done: Done


@dataclass
class _LoadDraft:
    model: str | None  # None unloads the draft model
    done: Done


@dataclass
class _Stop:
    pass


@dataclass
class _Call:
    """Run a function on the MLX thread (tests, tools); its result goes to `done`."""

    fn: Callable[[], Any]
    done: Done


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
    """The MLX thread: runs commands and the engine's steps."""

    def __init__(
        self,
        config: EngineConfig,
        *,
        deliver: Callable[[list[Event]], None],
        announce: Callable[[EngineEvent], None],
        died: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(name="tandem-mlx", daemon=True)
        self.config = config
        self._deliver = deliver
        self._announce = announce
        self._died = died
        self._commands: queue.Queue = queue.Queue()
        self.core = None  # engine.core.engine_core.EngineCore, once a model is loaded
        self._target = None
        self._stats = EngineStats(status="stopped")
        self._stats_lock = threading.Lock()
        self._rate = _Rate()
        self._recent = RecentTotals()
        self._prompt_cache = None  # engine.cache.PromptCache, made on this thread
        self._last_publish = 0.0
        self._started_at = time.perf_counter()

    # -- called from other threads -------------------------------------------------------------

    def post(self, command: object) -> None:
        self._commands.put(command)

    def submit(self, request: GenerationRequest) -> None:
        self.post(_Submit(request))

    def cancel(self, request_id: str) -> None:
        self.post(_Cancel(request_id))

    def load(self, model: str | None, done: Done) -> None:
        self.post(_Load(model, done))

    def load_draft(self, model: str | None, done: Done) -> None:
        self.post(_LoadDraft(model, done))

    def call(self, fn: Callable[[], Any], done: Done) -> None:
        self.post(_Call(fn, done))

    def stop(self) -> None:
        self.post(_Stop())

    def stats(self) -> EngineStats:
        with self._stats_lock:
            return copy.deepcopy(self._stats)

    # -- for calls on this thread --------------------------------------------------------------

    @property
    def target(self) -> Any:
        """The loaded target model (engine.models.LoadedModel)."""
        if self._target is None:
            raise RuntimeError("no model is loaded")
        return self._target

    def clear_prompt_cache(self) -> int:
        """Empty the prompt cache's RAM and disk tiers; bytes freed."""
        return self._prompt_cache.clear() if self._prompt_cache is not None else 0

    # -- the thread ----------------------------------------------------------------------------

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - reported, so nothing waits forever
            log.exception("the engine thread died")
            self._set_status("error", error=f"the engine thread died: {exc!r}")
            if self._died is not None:
                self._died(repr(exc))

    def _run(self) -> None:
        if self.config.log_blas:
            blas.log_blas()
        running = True
        while running:
            busy = self.core is not None and self.core.has_work()
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
            if running and self.core is not None and self.core.has_work():
                self._step()
            elif running:
                self._publish_stats(force=False)
            if running and self._prompt_cache is not None:  # its work between steps, bounded
                busy = self.core is not None and self.core.has_work()
                self._prompt_cache.tick(idle=not busy)
        self._drain_on_stop()

    def _handle(self, command: object) -> bool:
        if isinstance(command, _Stop):
            return False
        if isinstance(command, _Submit):
            if self.core is None:
                self._deliver([ErrorEvent(command.request.request_id, "no model is loaded")])
            else:
                self._deliver(self.core.add(command.request))
        elif isinstance(command, _Cancel):
            if self.core is not None:
                self.core.cancel(command.request_id)
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
        events = self.core.step()
        ended = any(isinstance(e, FinishedEvent | ErrorEvent) for e in events)
        self._publish_stats(force=ended)  # first: a caller told a reply ended sees its stats
        if events:
            self._deliver(events)

    # -- models --------------------------------------------------------------------------------

    def _load(self, command: _Load) -> None:
        from engine.cache.kv_quant import KVQuant
        from engine.core.engine_core import EngineCore
        from engine.models import load_model, resolve_model

        def progress(message: str, fraction: float) -> None:
            self._announce(LoadProgressEvent(message, fraction))

        self._set_status("loading")
        try:
            kv = KVQuant.of(self.config)  # bad settings fail the load with a clear message
            if not (command.model or "").startswith("random:"):
                resolve_model(command.model, progress=progress)  # a bad folder: nothing stops
            if self.core is not None:
                self.core.scheduler.cancel_all("the model is being switched")
                self._deliver(self.core.step())
                self.core = self._target = None
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
        self.core = EngineCore(target, config=self.config, reuse=self._make_reuse(target))
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
            return PromptReuse(self._prompt_cache, target, kv=KVQuant.of(self.config))
        except Exception:  # noqa: BLE001 - the engine works without a prompt cache
            log.exception("prompt cache unavailable")
            return None

    def _load_draft(self, command: _LoadDraft) -> None:
        from engine.models import ModelLoadError, check_draft_compatible, load_model
        from engine.speculative.draft_model import DraftModelDrafter

        if self.core is None:
            command.done(None, ModelLoadError("load a target model before a draft model"))
            return
        if command.model is None:
            self.core.set_drafter(None, name=DraftModelDrafter.name)
            with self._stats_lock:
                self._stats.draft_model = None
            command.done(None, None)
            return
        try:
            draft = load_model(command.model)
            check_draft_compatible(self._target, draft)
            drafter = DraftModelDrafter(draft, prefill_chunk=self.config.prefill_chunk)
        except Exception as exc:  # noqa: BLE001 - reported to the caller, engine keeps going
            log.warning("draft model load failed: %s", exc)
            self._announce(EngineErrorEvent(str(exc)))
            command.done(None, exc)
            return
        self.core.set_drafter(drafter)
        with self._stats_lock:
            self._stats.draft_model = draft.info
        self._announce(ModelLoadedEvent(self._target.info, draft.info))
        command.done(draft.info, None)

    # -- stats ---------------------------------------------------------------------------------

    def _set_status(self, status: str, *, error: str | None = None) -> None:
        with self._stats_lock:
            self._stats.status = status
            self._stats.error = error

    def _publish_stats(self, *, force: bool) -> None:
        now = time.perf_counter()
        if not force and now - self._last_publish < DEFAULT_STATS_PUBLISH_S:
            return
        self._last_publish = now
        if self.core is None:
            return
        s = self.core.scheduler
        running, waiting = s.counts()
        generated = s.out.generated_tokens
        rate = self._rate.add(now, generated)
        spec = s.spec_snapshot()
        with self._stats_lock:
            st = self._stats
            st.running, st.waiting = running, waiting
            st.batch_size = len(s.running)
            st.steps = s.steps
            st.generated_tokens = generated
            st.tokens_per_s = rate if (running or waiting) else 0.0
            st.uptime_s = now - self._started_at
            st.spec = spec
            st.spec_recent = self._recent.update(now, spec)
            st.recent_window_s = self._recent.window_s
            if self._prompt_cache is not None:
                st.cache = self._prompt_cache.stats()
            st.blas = blas.info().name
            st.device = _device_name()

    def _drain_on_stop(self) -> None:
        if self.core is not None:
            self.core.scheduler.cancel_all("the engine stopped")
            self._deliver(self.core.step())
        if self._prompt_cache is not None:
            self._prompt_cache.close()  # finishes pending disk writes
        self._set_status("stopped")


def _device_name() -> str:
    import mlx.core as mx

    return str(mx.default_device())
