"""The engine's statistics as plain values: one ModelStats per model held or loading (batch,
speed, memory, users) and the engine's totals over every model, unloaded ones included."""

from __future__ import annotations

import time
from typing import Any

import mlx.core as mx

from engine import blas
from engine.engine_reports import EngineStats, ModelStats
from engine.models import ModelLoadError
from engine.requests import SpecStats
from engine.speculative.metrics import RecentTotals
from engine.speculative.policy import draft_drafter_name


class StatsBoard:
    """Collects EngineStats on the MLX thread (the worker publishes them under its lock)."""

    def __init__(self, worker: Any) -> None:
        self._worker = worker
        self._recent = RecentTotals()
        self._started_at = time.perf_counter()
        self._device = str(mx.default_device())

    def collect(self, now: float) -> EngineStats:
        worker, pool = self._worker, self._worker.pool
        configured = self._key(worker.config.model)
        draft = self._key(worker.config.draft_model) if worker.config.draft_model else None
        in_use = worker.router.in_use()
        models = [self._model(h, configured, in_use) for h in pool.models.values()]
        models += [self._loading(job, configured) for job in pool.jobs]
        spec = SpecStats()
        spec.add(pool.retired.spec)
        for hosted in pool.models.values():
            if hosted.core is not None:
                spec.add(hosted.core.scheduler.spec_snapshot())
        st = EngineStats(models=models, spec=spec)
        st.model = next((m.info for m in models if m.key == configured), None)
        st.draft_model = next((m.info for m in models if m.key == draft), None)
        st.running = sum(m.running for m in models)
        st.waiting = sum(m.waiting for m in models)
        st.batch_size = sum(m.batch_size for m in models)
        st.steps = pool.retired.steps + sum(m.steps for m in models)
        st.generated_tokens = pool.retired.generated_tokens + sum(
            m.generated_tokens for m in models
        )
        st.tokens_per_s = sum(m.tokens_per_s for m in models)
        st.memory_budget_bytes = pool.budget_bytes
        st.memory_used_bytes = sum(m.memory_bytes for m in models if m.status == "ready")
        st.active_memory_bytes = mx.get_active_memory()
        st.uptime_s = now - self._started_at
        st.spec_recent = self._recent.update(now, spec)
        st.recent_window_s = self._recent.window_s
        cache = worker.factory.prompt_cache
        if cache is not None:
            st.cache = cache.stats()
        st.blas = blas.info().name
        st.device = self._device
        return st

    def _key(self, spec: str | None) -> str | None:
        try:
            return self._worker.pool.key_of(spec)
        except ModelLoadError:
            return None

    def _model(self, hosted: Any, configured: str | None, in_use: set[str]) -> ModelStats:
        worker = self._worker
        waiting_ids, drafting_ids = worker.router.waiting.using(hosted.key)
        stats = ModelStats(
            key=hosted.key,
            name=hosted.name,
            info=hosted.loaded.info,
            specs=sorted(hosted.specs),
            configured=hosted.key == configured,
            pinned=hosted.pinned,
            weights_bytes=hosted.weights_bytes,
            cache_bytes=hosted.cache_bytes(),
            idle_s=0.0 if hosted.key in in_use else time.monotonic() - hosted.last_used,
        )
        draft_name = draft_drafter_name(hosted.key)
        for other in worker.pool.models.values():
            if other.core is not None and hosted.key in other.drafts:
                drafting_ids += other.core.drafting_with(draft_name)
        core = hosted.core
        if core is not None:
            s = core.scheduler
            running, queued = s.counts()
            generated = s.out.generated_tokens
            rate = hosted.rate.add(time.perf_counter(), generated)
            stats.running, stats.waiting = running, queued
            stats.batch_size, stats.steps = len(s.running), s.steps
            stats.generated_tokens = generated
            stats.tokens_per_s = rate if (running or queued) else 0.0
            stats.request_ids = core.request_ids()
        stats.waiting += len(waiting_ids)
        stats.request_ids += waiting_ids
        stats.draft_request_ids = drafting_ids
        return stats

    def _loading(self, job: Any, configured: str | None) -> ModelStats:
        waiting_ids, drafting_ids = self._worker.router.waiting.using(job.key)
        return ModelStats(
            key=job.key,
            name=job.name,
            status="loading",
            specs=[(job.spec or "").strip()],
            configured=job.key == configured,
            pinned=job.pin,
            waiting=len(waiting_ids),
            weights_bytes=job.needs_bytes,
            request_ids=waiting_ids,
            draft_request_ids=drafting_ids,
            load_fraction=job.fraction,
        )
