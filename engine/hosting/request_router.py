"""Which model each request runs on: it names its model (and draft model) or gets the
engine's configured ones; it joins that model's EngineCore at once when the models are loaded,
else it waits for their loads (told how far they got) while the other models' rows stream."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from engine.config import EngineConfig
from engine.hosting.waiting_requests import WaitingRequest, WaitingRequests
from engine.requests import (
    ErrorEvent,
    Event,
    GenerationRequest,
    ModelLoadingEvent,
    SpecMethod,
)
from engine.speculative.policy import draft_drafter_name

log = logging.getLogger(__name__)

Done = Callable[[Any, BaseException | None], None]


class RequestRouter:
    """Sends requests to their models' cores, or has them wait for the models to load."""

    def __init__(
        self, config: EngineConfig, pool: Any, deliver: Callable[[list[Event]], None]
    ) -> None:
        self.config = config
        self.pool = pool  # engine.hosting.model_pool.ModelPool
        self.waiting = WaitingRequests()
        self._deliver = deliver

    def target_spec(self, model: str | None) -> str | None:
        return self.config.model if model is None else model

    def draft_spec(self, request: GenerationRequest) -> str | None:
        """The draft model a request uses: the one it names, else the configured one ("auto"
        only on the configured model: other models may have other tokenizers)."""
        spec = request.speculative
        method = SpecMethod(spec.method)
        if method not in (SpecMethod.DRAFT_MODEL, SpecMethod.AUTO):
            return None
        if spec.draft_model is not None or self.config.draft_model is None:
            return spec.draft_model
        if method == SpecMethod.AUTO and request.model is not None:
            if self.pool.key_of(request.model) != self.pool.key_of(self.config.model):
                return None
        return self.config.draft_model

    # -- requests ------------------------------------------------------------------------------

    def submit(self, request: GenerationRequest) -> None:
        rid = request.request_id
        try:
            target_spec, draft_spec = self.target_spec(request.model), self.draft_spec(request)
            target = self.pool.key_of(target_spec)
            draft = self.pool.key_of(draft_spec) if draft_spec is not None else None
        except Exception as exc:  # noqa: BLE001 - e.g. a folder that is not a model
            self._deliver([ErrorEvent(rid, str(exc))])
            return
        waiting = WaitingRequest(request, target, draft)
        for key, spec in ((target, target_spec), (draft, draft_spec)):
            if key is not None:
                self.pool.want(key, spec, waiter=rid)
        if waiting.needs() <= self.pool.models.keys():
            self._admit(waiting)
            return
        self.waiting.add(waiting)
        job = next(j for j in self.pool.jobs if j.key in waiting.needs())
        self._deliver([ModelLoadingEvent(rid, job.name, job.message, job.fraction)])

    def cancel(self, request_id: str) -> None:
        ended = self.waiting.cancel(request_id)
        if ended is not None:
            self.pool.forget_waiter(request_id)
            self._deliver([ended])
            return
        for hosted in self.pool.models.values():
            if hosted.core is not None and request_id in hosted.core.request_ids():
                hosted.core.cancel(request_id)

    def _admit(self, waiting: WaitingRequest) -> None:
        request = waiting.request
        target = self.pool.models[waiting.target]
        try:
            core = self.pool.core_of(target)
            draft = None
            if waiting.draft is not None:
                draft = self.pool.install_draft(target, self.pool.models[waiting.draft])
        except Exception as exc:  # noqa: BLE001 - this request fails, the engine goes on
            log.warning("request %s refused: %s", request.request_id, exc)
            self._deliver([ErrorEvent(request.request_id, str(exc))])
            return
        self._deliver(core.add(request, draft=draft, arrival=waiting.arrival))

    # -- loads ---------------------------------------------------------------------------------

    def load_ended(self, key: str, loaded: bool, error: str) -> None:
        """A load ended: admit the requests it completes, or end those that needed it."""
        if not loaded:
            self._deliver(self.waiting.fail(key, error))
            return
        for waiting in self.waiting.ready(set(self.pool.models)):
            self._admit(waiting)

    def load_progress(self, job: Any) -> None:
        """Tell the requests waiting for a load how far it got."""
        self._deliver(
            [ModelLoadingEvent(rid, job.name, job.message, job.fraction) for rid in job.waiters]
        )

    def in_use(self) -> set[str]:
        """Keys of the models requests use now: as targets (running, queued or waiting for a
        load), as draft models, or being loaded."""
        used = self.waiting.keys_needed() | {job.key for job in self.pool.jobs}
        for key, hosted in self.pool.models.items():
            if hosted.core is not None and hosted.core.has_requests():
                used.add(key)
                used.update(
                    d for d in hosted.drafts if hosted.core.drafting_with(draft_drafter_name(d))
                )
        return used

    def end_all(self, message: str) -> None:
        self._deliver(self.waiting.end_all(message))
