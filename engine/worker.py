"""The one thread that owns every MLX call: the loaded models, their caches and the step loop.

Commands arrive on a queue; results leave as plain Python values through `deliver`, which the
API points at `loop.call_soon_threadsafe`. The thread blocks on its queue while idle. If it ever
dies, `died` says why, so that nothing waits for it forever.

Several models at once: each loaded model that requests run on has its own EngineCore (batch,
scheduler, drafters). Each turn of the loop steps the model owed the most tokens
(hosting/fair_share.py), then gives a slice of time to a model being loaded
(hosting/model_loader.py), then to the prompt cache. A request for a model that is not loaded
waits for it (hosting/waiting_requests.py) while the others stream.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from engine import blas
from engine import worker_commands as commands
from engine.config import EngineConfig
from engine.core.prefill_pacer import PrefillPacer
from engine.default_model import default_cache_root
from engine.engine_reports import EngineEvent, EngineStats
from engine.hosting.event_outbox import EventOutbox
from engine.hosting.fair_share import FairShare
from engine.hosting.model_loader import slice_seconds
from engine.hosting.request_router import RequestRouter
from engine.kernels.compiled_cache import keep_compiled_kernels
from engine.kernels.stale_kernels import prune_stale_kernels
from engine.kernels.temp_folder import mend_temp_folder
from engine.requests import ErrorEvent, Event, FinishedEvent, GenerationRequest

log = logging.getLogger(__name__)

DEFAULT_IDLE_WAIT_S = 0.5
DEFAULT_STATS_PUBLISH_S = 0.1
STEP_TIME_WEIGHT = 0.2  # of the newest step in the running mean of step times

Done = commands.Done


class EngineWorker(threading.Thread):
    """The MLX thread: runs commands and the loaded models' steps."""

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
        self._outbox = EventOutbox(deliver, interval_s=config.stream_interval_s)
        self._deliver = self._outbox.add
        self._announce = announce
        self._died = died
        self._commands: queue.Queue = queue.Queue()
        self.pool = None  # engine.hosting.model_pool.ModelPool, made on this thread
        self.router = None  # engine.hosting.request_router.RequestRouter
        self.fair = FairShare()
        self._stats = EngineStats(status="stopped")
        self._stats_lock = threading.Lock()
        self.factory = None  # engine.hosting.core_factory.CoreFactory: cores, prompt cache
        self.counts = None  # engine.hosting.tokenizer_counts.TokenizerCounts
        self._board = None  # engine.hosting.stats_board.StatsBoard
        self._last_publish = 0.0
        self._step_s = 0.0  # a running mean of the steps' wall time (how long loads may slice)

    # -- called from other threads -------------------------------------------------------------

    def post(self, command: object) -> None:
        self._commands.put(command)

    def load(self, model: str | None, done: Done, **options: bool) -> None:
        self.post(commands.Load(model, done, **options))

    def set_default(self, model: str | None, done: Done) -> None:
        self.post(commands.SetDefault(model, done))

    def unload(self, model: str | None, done: Done) -> None:
        self.post(commands.Unload(model, done))

    def pin(self, model: str | None, pinned: bool, done: Done) -> None:
        self.post(commands.Pin(model, pinned, done))

    def count_tokens(
        self, messages: list[dict[str, str]], continue_reply: bool, model: str | None, done: Done
    ) -> None:
        self.post(commands.CountTokens(messages, continue_reply, model, done))

    def submit(self, request: GenerationRequest) -> None:
        self.post(commands.Submit(request))

    def cancel(self, request_id: str) -> None:
        self.post(commands.Cancel(request_id))

    def call(self, fn: Callable[[], Any], done: Done) -> None:
        self.post(commands.Call(fn, done))

    def stop(self) -> None:
        self.post(commands.Stop())

    def stats(self) -> EngineStats:
        with self._stats_lock:
            return copy.deepcopy(self._stats)

    # -- for calls on this thread --------------------------------------------------------------

    def core_for(self, model: str | None = None) -> Any:
        """The EngineCore of a loaded model (None: the configured one), for tools and tests."""
        return self.pool.core_of(self.pool.find(self.router.target_spec(model)))

    def clear_prompt_cache(self) -> int:
        """Empty the prompt cache's RAM and disk tiers; bytes freed."""
        cache = self.factory.prompt_cache
        return cache.clear() if cache is not None else 0

    # -- the thread ----------------------------------------------------------------------------

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - reported, so nothing waits forever
            log.exception("the engine thread died")
            try:
                self._outbox.flush()  # what was produced before still arrives, first
            except Exception:  # noqa: BLE001 - the loop may be gone
                log.exception("could not deliver the last events")
            self._set_status("error", error=f"the engine thread died: {exc!r}")
            if self._died is not None:
                self._died(repr(exc))

    def _run(self) -> None:
        try:
            self._serve()
        finally:
            _release_streams()  # Engine.stop() joins this thread, so this is done before exit

    def _serve(self) -> None:
        mend_temp_folder(default_cache_root())  # before this thread compiles anything
        kernels = keep_compiled_kernels(default_cache_root())
        if kernels is not None:
            prune_stale_kernels(kernels)
        if self.config.log_blas:
            blas.log_blas()
        self._setup()
        running = True
        while running:
            busy = self._busy()
            if not busy:
                self._outbox.flush()  # nothing held while the thread waits
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
            if running:
                self._turn()
        self._drain_on_stop()

    def _setup(self) -> None:
        from engine.cache.settings import PromptCacheSettings
        from engine.hosting.core_factory import CoreFactory
        from engine.hosting.memory_budget import default_budget_bytes
        from engine.hosting.model_pool import ModelPool
        from engine.hosting.stats_board import StatsBoard
        from engine.hosting.tokenizer_counts import TokenizerCounts

        config = self.config
        budget = config.memory_budget_bytes
        if budget is None:
            cache_ram = PromptCacheSettings.of(config).ram_bytes if config.prompt_cache else 0
            budget = default_budget_bytes(cache_ram)
        self.factory = CoreFactory(config)
        self.pool = ModelPool(
            budget_bytes=budget,
            make_core=self.factory.core,
            make_drafter=self.factory.drafter,
            announce=self._announce,
            progress=lambda job: self.router.load_progress(job),
        )
        self.router = RequestRouter(config, self.pool, self._deliver)
        self.counts = TokenizerCounts(self.pool.tokenizers)
        self._board = StatsBoard(self)

    def _busy(self) -> bool:
        return self.pool.loading or any(h.has_work() for h in self.pool.models.values())

    def _turn(self) -> None:
        """One model's step, a slice of loading, the prompt cache's share."""
        self._outbox.flush_due()
        key = self.fair.pick(k for k, h in self.pool.models.items() if h.has_work())
        if key is not None:
            self._step(key)
        if self.pool.loading:
            self._load_slice()
        if key is None:
            self._publish_stats(force=False)
        cache = self.factory.prompt_cache
        if cache is not None:  # its work between steps, bounded
            cache.tick(idle=not self._busy())

    def _step(self, key: str) -> None:
        hosted = self.pool.models[key]
        scheduler = hosted.core.scheduler
        self._pace_beside_others(key, scheduler.pacer)
        before, rows = scheduler.out.generated_tokens, len(scheduler.running)
        start = time.perf_counter()
        events = hosted.core.step()
        took = time.perf_counter() - start
        self._step_s += STEP_TIME_WEIGHT * (took - self._step_s)  # a recent step's length
        self.fair.charge(key, (scheduler.out.generated_tokens - before) / max(1, rows))
        hosted.touch()
        ended = any(isinstance(e, FinishedEvent | ErrorEvent) for e in events)
        self._publish_stats(force=ended)  # first: a caller told a reply ended sees its stats
        if events:
            self._deliver(events)

    def _pace_beside_others(self, key: str, pacer: PrefillPacer) -> None:
        """Another model's chats wait through this model's step too: its prompt chunks are paced
        by their decode step (a 2,048-token prompt in whole chunks held them seconds a step)."""
        others = [
            h.core.scheduler
            for k, h in self.pool.models.items()
            if k != key and h.core is not None and h.core.scheduler.running
        ]
        known = [s.pacer.decode_s for s in others if s.pacer.decode_s is not None]
        pacer.others_decoding = bool(others)
        pacer.others_decode_s = min(known) if known else None

    def _handle(self, command: object) -> bool:
        if isinstance(command, commands.Stop):
            return False
        try:
            if isinstance(command, commands.Submit):
                self.router.submit(command.request)
            elif isinstance(command, commands.Cancel):
                self.router.cancel(command.request_id)
            elif isinstance(command, commands.Load):
                self._load(command)
            elif isinstance(command, commands.Unload):
                self._unload(command)
            elif isinstance(command, commands.SetDefault):
                self._set_default(command)
            elif isinstance(command, commands.Pin):
                hosted = self.pool.find(self.router.target_spec(command.model))
                hosted.pinned = command.pinned
                self._publish_stats(force=True)  # a caller told it is pinned sees it so
                command.done(hosted.loaded.info, None)
            elif isinstance(command, commands.CountTokens):
                self._count_tokens(command)
            elif isinstance(command, commands.Call):
                command.done(command.fn(), None)
        except BaseException as exc:  # noqa: BLE001 - handed back to whoever asked
            done = getattr(command, "done", None)
            if done is None:
                raise
            done(None, exc)
        return True

    def _count_tokens(self, command: commands.CountTokens) -> None:
        from engine.prompt import apply_chat_template

        key = self.pool.key_of(self.router.target_spec(command.model))
        hosted = self.pool.models.get(key)
        if hosted is None:  # its tokenizer alone, on the helper thread
            future = self.counts.count(key, command.messages, continue_reply=command.continue_reply)
            future.add_done_callback(lambda f: command.done(*_outcome(f)))
            return
        ids = apply_chat_template(
            command.messages, hosted.loaded.tokenizer, continue_reply=command.continue_reply
        )
        command.done(len(ids), None)

    # -- models --------------------------------------------------------------------------------

    def _set_default(self, command: commands.SetDefault) -> None:
        self.pool.key_of(command.model)  # a folder that is not a model: refused now
        self.config = dataclasses.replace(self.config, model=command.model)
        self.router.config = self.config
        self._publish_stats(force=True)
        command.done(None, None)

    def _load(self, command: commands.Load) -> None:
        spec = self.router.target_spec(command.model)
        if command.configured:
            self._set_status("loading")

        def done(info: Any, error: BaseException | None) -> None:
            if error is None:
                try:
                    hosted = self.pool.models[self.pool.key_of(spec)]
                    if command.configured:  # bad engine settings fail its load, clearly
                        self.pool.core_of(hosted)
                    if command.configured_draft:
                        self._check_configured_draft(hosted)
                except Exception as exc:  # noqa: BLE001 - handed to the caller
                    error = exc
            if command.configured:
                failed = error is not None
                self._set_status("error" if failed else "ready", error=str(error or "") or None)
            self._publish_stats(force=True)
            command.done(info if error is None else None, error)

        try:
            key = self.pool.key_of(spec)
        except Exception as exc:  # noqa: BLE001 - e.g. a folder that is not a model
            done(None, exc)
            return
        self.pool.want(key, spec, caller=done, pin=command.pin)

    def _check_configured_draft(self, draft: Any) -> None:
        target = self.pool.models.get(self.pool.key_of(self.config.model))
        if target is not None:
            self.pool.install_draft(target, draft)

    def _load_slice(self) -> None:
        budget = slice_seconds(self._step_s)
        key, hosted, error = self.pool.advance(budget, self.router.in_use())
        if key:
            self.router.load_ended(key, hosted is not None, error)

    def _unload(self, command: commands.Unload) -> None:
        key = self.pool.key_of(self.router.target_spec(command.model))
        self.pool.check_unload(key, self.router.in_use())
        info = self.pool.unload(key, "unloaded by hand")
        self.fair.forget(key)
        self._publish_stats(force=True)
        command.done(info, None)

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
        fresh = self._board.collect(now)
        with self._stats_lock:
            fresh.status, fresh.error = self._stats.status, self._stats.error
            self._stats = fresh

    def _drain_on_stop(self) -> None:
        self.router.end_all("the engine stopped")
        for hosted in self.pool.models.values():
            if hosted.core is not None:
                hosted.core.scheduler.cancel_all("the engine stopped")
                self._deliver(hosted.core.step())
        self._outbox.flush()
        self.pool.close()
        if self.factory.prompt_cache is not None:
            self.factory.prompt_cache.close()  # finishes pending disk writes
        self._set_status("stopped")


def _release_streams() -> None:
    """Destroy the MLX streams this thread made. MLX asks threads that used it to do so before
    the process exits: left to its static destructors, a stream made on this thread could abort
    the process at exit ("terminate called without an active exception", seen in a README
    snippet's process after `await engine.stop()`; mlx issues 3126 and 4327)."""
    import mlx.core as mx

    try:
        mx.synchronize()
        if hasattr(mx, "clear_streams"):
            mx.clear_streams()
    except Exception:  # noqa: BLE001 - leaving anyway; MLX's own teardown remains
        log.warning("could not release this thread's MLX streams", exc_info=True)


def _outcome(future: Any) -> tuple[Any, BaseException | None]:
    error = future.exception()
    return (None, error) if error is not None else (future.result(), None)
