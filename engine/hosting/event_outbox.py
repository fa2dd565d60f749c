"""Events leave the MLX thread in batches of a few steps, not one hop per step.

Each hop wakes the asyncio thread, which then holds the GIL while the MLX thread wants it to
build the next forward; a small model's step is bound by that host work (a 1B model steps every
3-4 ms on the H200), so one hop per token costs every stream a share of its speed. Tokens and
stats are held for at most `interval_s` (vLLM's `stream_interval` does the same); everything
else goes at once and takes the held events with it, in order: a reply's first token (time to
first token), its end, errors, progress. The worker flushes before it waits for commands.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from engine.config import DEFAULT_STREAM_INTERVAL_S
from engine.requests import ErrorEvent, Event, FinishedEvent, StatsEvent, TokenEvent


class EventOutbox:
    """Holds token events for up to `interval_s`, then delivers them all in one hop."""

    def __init__(
        self,
        deliver: Callable[[list[Event]], None],
        *,
        interval_s: float = DEFAULT_STREAM_INTERVAL_S,
    ) -> None:
        self._deliver = deliver
        self.interval_s = interval_s
        self._held: list[Event] = []
        self._since = 0.0  # when the oldest held event was added
        self._streaming: set[str] = set()  # requests whose first token went out

    def add(self, events: list[Event]) -> None:
        """Queue a step's events; deliver now (with everything held) when one is urgent or
        the oldest held event has waited `interval_s`."""
        if not events:
            return
        now = time.perf_counter()
        if not self._held:
            self._since = now
        self._held.extend(events)
        if any(self._urgent(e) for e in events) or now - self._since >= self.interval_s:
            self.flush()

    def flush_due(self) -> None:
        """Deliver what has waited its interval (between steps)."""
        if self._held and time.perf_counter() - self._since >= self.interval_s:
            self.flush()

    def flush(self) -> None:
        """Deliver everything held now (before the thread waits, or stops)."""
        if self._held:
            events, self._held = self._held, []
            self._deliver(events)

    def _urgent(self, event: Event) -> bool:
        if isinstance(event, StatsEvent):
            return False
        if isinstance(event, TokenEvent):
            first = event.request_id not in self._streaming
            self._streaming.add(event.request_id)
            return first
        if isinstance(event, FinishedEvent | ErrorEvent):
            self._streaming.discard(event.request_id)
        return True
