"""The interface every drafter implements: propose up to k tokens per row; learn what was
accepted. Drafters run on the engine thread and see plain token lists."""

from __future__ import annotations

from typing import Protocol

from engine.request_state import RequestState


class Drafter(Protocol):
    name: str

    def propose(self, row: RequestState, k: int) -> list[int]:
        """Up to k tokens that might follow `row.history` (which ends with the pending input)."""
        ...

    def observe(self, row: RequestState, drafted: list[int], accepted: int) -> None:
        """The verify round kept the first `accepted` of `drafted`."""
        ...
