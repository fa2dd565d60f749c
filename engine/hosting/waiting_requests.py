"""Requests that wait for a model to load (their target, their draft model, or both) before
they join that model's queue; the models they need count as in use meanwhile."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from engine.requests import (
    ErrorEvent,
    FinishedEvent,
    FinishReason,
    GenerationRequest,
    RequestStats,
)


@dataclass
class WaitingRequest:
    """A request and the keys of the models it needs."""

    request: GenerationRequest
    target: str
    draft: str | None = None
    arrival: float = field(default_factory=time.perf_counter)  # when the engine got it

    @property
    def request_id(self) -> str:
        return self.request.request_id

    def needs(self) -> set[str]:
        return {self.target} | ({self.draft} if self.draft else set())


@dataclass
class WaitingRequests:
    """Requests by id, in arrival order."""

    requests: dict[str, WaitingRequest] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.requests)

    def add(self, waiting: WaitingRequest) -> None:
        self.requests[waiting.request_id] = waiting

    def keys_needed(self) -> set[str]:
        return {key for w in self.requests.values() for key in w.needs()}

    def ready(self, loaded: set[str]) -> list[WaitingRequest]:
        """Take the requests whose models are all loaded."""
        out = [w for w in self.requests.values() if w.needs() <= loaded]
        for w in out:
            del self.requests[w.request_id]
        return out

    def fail(self, key: str, message: str) -> list[ErrorEvent]:
        """End the requests that need the model `key`, which could not load."""
        failed = [w for w in self.requests.values() if key in w.needs()]
        for w in failed:
            del self.requests[w.request_id]
        return [ErrorEvent(w.request_id, message) for w in failed]

    def cancel(self, request_id: str) -> FinishedEvent | None:
        waiting = self.requests.pop(request_id, None)
        if waiting is None:
            return None
        stats = RequestStats(finish_reason=FinishReason.CANCELLED)
        return FinishedEvent(request_id, FinishReason.CANCELLED, "", [], stats)

    def end_all(self, message: str) -> list[ErrorEvent]:
        events = [ErrorEvent(rid, message) for rid in self.requests]
        self.requests.clear()
        return events

    def using(self, key: str) -> tuple[list[str], list[str]]:
        """(request ids waiting for `key` as their target, as their draft model)."""
        values = self.requests.values()
        return (
            [w.request_id for w in values if w.target == key],
            [w.request_id for w in values if w.draft == key],
        )
