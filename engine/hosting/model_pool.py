"""The models the engine holds: loading them one at a time in slices (model_loader.py), the
memory budget they share, unloading idle ones least recently used first when a new one needs
room, pins, and the draft models installed in each target's EngineCore.

Runs on the MLX thread only (its tokenizer helper thread touches no MLX).
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import mlx.core as mx

from engine.engine_reports import LoadProgressEvent, ModelInfo, ModelLoadedEvent, ModelUnloadedEvent
from engine.hosting.hosted_model import HostedModel, RetiredTotals
from engine.hosting.memory_budget import fmt_bytes
from engine.hosting.model_loader import LoadJob
from engine.models import (
    RANDOM_SPEC_PREFIX,
    LoadedModel,
    ModelLoadError,
    check_draft_compatible,
    is_default_spec,
    resolve_model,
)
from engine.speculative.policy import draft_drafter_name

log = logging.getLogger(__name__)

DEFAULT_PROGRESS_EVERY_S = 0.1  # load progress reaches listeners at most this often
MAX_LEAVING_STEPS = 4  # steps an unloading model may take to let its ended rows leave

Done = Callable[[Any, BaseException | None], None]


class ModelTooLarge(ModelLoadError):
    """A model that does not fit in the memory budget; the message has both numbers."""


class ModelBusy(ModelLoadError):
    """A model that requests are using cannot be unloaded now."""


class ModelPool:
    """Loaded models by key, the load queue and the memory budget."""

    def __init__(
        self,
        *,
        budget_bytes: int,
        make_core: Callable[[LoadedModel], Any],
        make_drafter: Callable[[LoadedModel], Any],
        announce: Callable[[Any], None],
        progress: Callable[[LoadJob], None],
    ) -> None:
        self.budget_bytes = budget_bytes
        self.models: dict[str, HostedModel] = {}
        self.jobs: list[LoadJob] = []  # the first one is loading
        self._make_core = make_core
        self._make_drafter = make_drafter
        self._announce = announce
        self._progress = progress  # tells a job's waiting requests how far it got
        self._keys: dict[str, str] = {}  # spec -> key
        self._last_progress = 0.0
        self.retired = RetiredTotals()
        self.tokenizers = ThreadPoolExecutor(1, thread_name_prefix="tandem-tokenizer")

    # -- names ---------------------------------------------------------------------------------

    def key_of(self, spec: str | None) -> str:
        """What identifies the model `spec` names: its resolved folder (the default model's
        converted folder, made on first load) or a "random:" spec. Raises ModelLoadError for a
        folder or repo id that is not a loadable model."""
        text = (spec or "").strip()
        if text in self._keys:
            return self._keys[text]
        if text.startswith(RANDOM_SPEC_PREFIX):
            key = text
        elif is_default_spec(spec):
            from engine.default_model import default_model_dir

            key = str(default_model_dir().resolve())
        else:
            key = str(Path(resolve_model(text)).resolve())
        self._keys[text] = key
        return key

    def find(self, spec: str | None) -> HostedModel:
        """The loaded model `spec` names; ModelLoadError when it is not loaded."""
        hosted = self.models.get(self.key_of(spec))
        if hosted is None:
            raise ModelLoadError(f"{spec or 'the default model'} is not loaded")
        return hosted

    # -- loading -------------------------------------------------------------------------------

    def want(
        self,
        key: str,
        spec: str | None,
        *,
        waiter: str | None = None,
        caller: Done | None = None,
        pin: bool = False,
    ) -> HostedModel | None:
        """The loaded model, or None after queueing its load (`waiter`: a request told the
        progress; `caller`: told the result)."""
        hosted = self.models.get(key)
        if hosted is not None:
            hosted.specs.add((spec or "").strip())
            hosted.pinned = hosted.pinned or pin
            hosted.touch()
            if caller is not None:
                caller(hosted.loaded.info, None)
            return hosted
        job = next((j for j in self.jobs if j.key == key), None)
        if job is None:
            job = LoadJob(key, spec, name=_display_name(spec))
            self.jobs.append(job)
        if waiter is not None:
            job.waiters.append(waiter)
        if caller is not None:
            job.callers.append(caller)
        job.pin = job.pin or pin
        return None

    @property
    def loading(self) -> bool:
        return bool(self.jobs)

    def forget_waiter(self, request_id: str) -> None:
        """A waiting request ended; a load nobody waits for any more is dropped."""
        for job in list(self.jobs):
            if request_id in job.waiters:
                job.waiters.remove(request_id)
                if not job.wanted:
                    log.info("load of %s dropped: nothing waits for it", job.name)
                    job.abandon()
                    self.jobs.remove(job)

    def advance(self, slice_s: float, in_use: set[str]) -> tuple[str, HostedModel | None, str]:
        """Work on the first load for about `slice_s`. Returns (key, the model once loaded,
        error message) for a load that ended, or ("", None, "") while it goes on."""
        job = self.jobs[0]
        try:
            if job.opened is None:
                need = job.open(self.tokenizers, lambda m, f: self._report(job, m, f))
                self._make_room(need, job.name, in_use | {job.key})
                return "", None, ""
            loaded = job.advance(slice_s, lambda m, f: self._report(job, m, f))
        except ModelLoadError as exc:
            return self._failed(job, exc)
        except Exception as exc:  # noqa: BLE001 - a load's bug fails the load, not the engine
            log.exception("loading %s failed", job.name)
            return self._failed(job, ModelLoadError(f"Could not load {job.name}: {exc}"))
        if loaded is None:
            return "", None, ""
        self.jobs.pop(0)
        hosted = HostedModel(job.key, loaded, specs={(job.spec or "").strip()}, pinned=job.pin)
        self.models[job.key] = hosted
        log.info("loaded %s (%s)", hosted.name, fmt_bytes(hosted.weights_bytes))
        self._announce(ModelLoadedEvent(loaded.info))
        for caller in job.callers:
            caller(loaded.info, None)
        return job.key, hosted, ""

    def _failed(self, job: LoadJob, exc: ModelLoadError) -> tuple[str, None, str]:
        log.warning("model load failed: %s", exc)
        job.abandon()
        self.jobs.remove(job)
        for caller in job.callers:
            caller(None, exc)
        return job.key, None, str(exc)

    def _report(self, job: LoadJob, message: str, fraction: float) -> None:
        now = time.monotonic()
        if fraction < 1.0 and now - self._last_progress < DEFAULT_PROGRESS_EVERY_S:
            return
        self._last_progress = now
        self._announce(LoadProgressEvent(f"{job.name}: {message}", fraction, model=job.name))
        self._progress(job)

    # -- memory --------------------------------------------------------------------------------

    def used_bytes(self) -> int:
        return sum(h.weights_bytes + h.cache_bytes() for h in self.models.values())

    def _make_room(self, need: int, name: str, in_use: set[str]) -> None:
        """Unload idle, unpinned models (least recently used first) until `need` more bytes
        fit; ModelTooLarge, unloading nothing, when they would not."""
        budget, used = self.budget_bytes, self.used_bytes()
        if used + need <= budget:
            return
        if need > budget:
            raise ModelTooLarge(
                f"{name} needs {fmt_bytes(need)} of memory, more than the whole memory budget "
                f"of {fmt_bytes(budget)}"
            )
        idle = sorted(
            (h for h in self.models.values() if h.key not in in_use and not h.pinned),
            key=lambda h: h.last_used,
        )
        freeable = sum(h.weights_bytes + h.cache_bytes() for h in idle)
        if used - freeable + need > budget:
            kept = [h for h in self.models.values() if h not in idle]
            held = ", ".join(
                f"{h.name} ({fmt_bytes(h.weights_bytes + h.cache_bytes())}"
                + (", pinned)" if h.pinned else ", in use)")
                for h in kept
            )
            raise ModelTooLarge(
                f"{name} needs {fmt_bytes(need)} of memory and the memory budget is "
                f"{fmt_bytes(budget)}, of which {fmt_bytes(used - freeable)} is held by models "
                f"in use or pinned: {held}. It can load once one of them is idle or unpinned."
            )
        for hosted in idle:
            if self.used_bytes() + need <= budget:
                break
            self.unload(hosted.key, f"made room for {name}")

    def unload(self, key: str, reason: str) -> ModelInfo:
        """Drop a model and free its memory: its core and caches, and its drafters in other
        models' cores. The caller checks that nothing uses it."""
        hosted = self.models.pop(key)
        info = hosted.loaded.info
        for other in self.models.values():
            if key in other.drafts:
                other.core.set_drafter(None, name=draft_drafter_name(key))
                other.drafts.discard(key)
        if hosted.core is not None:
            for _ in range(MAX_LEAVING_STEPS):  # rows that just ended publish their caches
                if not hosted.core.has_work():
                    break
                hosted.core.step()
            self.retired.add(hosted.core)
            hosted.core.executor.reset()
        hosted.core = hosted.loaded = None
        del hosted
        if gc.isenabled():  # cycles' arrays must go now (a host that collects on its own
            gc.collect()  # thread, as the app does for Qt's sake, has turned this off)
        mx.clear_cache()  # and MLX's buffer cache gives the memory back
        log.info("unloaded %s: %s", info.name, reason)
        self._announce(ModelUnloadedEvent(info, reason))
        return info

    def check_unload(self, key: str, in_use: set[str]) -> HostedModel:
        """The model to unload by hand; ModelBusy while requests use it."""
        hosted = self.models.get(key)
        if hosted is None:
            raise ModelLoadError("that model is not loaded")
        if key in in_use:
            raise ModelBusy(f"{hosted.name} is in use: unload it once its replies have finished")
        return hosted

    # -- cores and drafters --------------------------------------------------------------------

    def core_of(self, hosted: HostedModel) -> Any:
        """The model's EngineCore, made the first time a request runs on it."""
        if hosted.core is None:
            hosted.core = self._make_core(hosted.loaded)
        return hosted.core

    def install_draft(self, target: HostedModel, draft: HostedModel) -> str:
        """Make `draft` a drafter in `target`'s core (once); its drafter name. ModelLoadError
        naming both when it cannot draft for the target."""
        name = draft_drafter_name(draft.key)
        if draft.key in target.drafts:
            return name
        if draft.key in target.refused_drafts:
            raise ModelLoadError(target.refused_drafts[draft.key])
        try:
            check_draft_compatible(target.loaded, draft.loaded)
            drafter = self._make_drafter(draft.loaded)
        except (ModelLoadError, ValueError) as exc:
            message = f"{exc} (draft {draft.name} for target {target.name})"
            if draft.name in str(exc) and target.name in str(exc):
                message = str(exc)
            target.refused_drafts[draft.key] = message
            raise ModelLoadError(message) from exc
        self.core_of(target).set_drafter(drafter, name=name)
        target.drafts.add(draft.key)
        return name

    def close(self) -> None:
        """The engine stops: loads under way end, their callers told so."""
        for job in self.jobs:
            job.abandon()
            for caller in job.callers:
                caller(None, ModelLoadError(f"the engine stopped before {job.name} loaded"))
        self.jobs.clear()
        self.tokenizers.shutdown(wait=False, cancel_futures=True)


def _display_name(spec: str | None) -> str:
    if is_default_spec(spec):
        from engine.default_model import DEFAULT_MODEL_NAME

        return DEFAULT_MODEL_NAME
    assert spec is not None
    text = spec.strip().rstrip("/\\")
    looks_like_repo = text.count("/") == 1 and not Path(text).expanduser().exists()
    return text if looks_like_repo else Path(text).name
