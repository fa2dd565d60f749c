"""Speculation metrics, recorded in one place (vLLM's SpecDecodingStats terms): what each target
forward produced for a row, each verify round's drafts and acceptance by position, a row's
acceptance over its last rounds, and the engine's totals over a recent window. The derived
figures (acceptance by position, mean acceptance length, tokens per forward) are properties of
`engine.requests.SpecStats`, so the app and the benchmark read the same numbers."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from engine.requests import SpecStats

DEFAULT_RECENT_ROUNDS = 16  # a row's "recent acceptance" covers this many verify rounds
DEFAULT_RECENT_WINDOW_S = 60.0  # the engine's "recent" figures cover this many seconds
DEFAULT_SNAPSHOT_EVERY_S = 1.0


def record_forward(spec: SpecStats, *, emitted: int, saved: int = 0) -> None:
    """One target forward in which the row took part produced `emitted` tokens of its reply
    (an EOS included), `saved` of them accepted draft tokens."""
    spec.target_forwards += 1
    spec.emitted_tokens += emitted
    spec.forwards_saved += saved


def record_round(
    spec: SpecStats,
    draft: list[int],
    accepted: int,
    *,
    draft_s: float,
    verify_s: float,
    sample_s: float,
    drafter: str | None = None,
    guessed: bool = False,
    ahead: bool = False,
) -> None:
    """A verify round's draft for the row and how much of it the target kept (`drafter`: the
    drafter's kind, counted in rounds_by_drafter; `guessed`: drawn on a wrong guess, counted
    apart; `ahead`: queued before the last round was read back)."""
    spec.draft_time_s += draft_s
    spec.verify_time_s += verify_s
    spec.sample_time_s += sample_s
    if not draft:
        return
    spec.ahead_rounds += ahead
    if guessed:
        spec.guessed_rounds += 1
        return
    spec.rounds += 1
    if drafter:
        spec.rounds_by_drafter[drafter] = spec.rounds_by_drafter.get(drafter, 0) + 1
    spec.draft_tokens += len(draft)
    spec.accepted_tokens += accepted
    for pos in range(len(draft)):
        if len(spec.drafted_by_position) <= pos:
            spec.drafted_by_position.append(0)
            spec.accepted_by_position.append(0)
        spec.drafted_by_position[pos] += 1
        spec.accepted_by_position[pos] += pos < accepted


@dataclass
class RecentAcceptance:
    """A row's draft acceptance over its last rounds that had a draft."""

    rounds: deque = field(default_factory=lambda: deque(maxlen=DEFAULT_RECENT_ROUNDS))

    def add(self, drafted: int, accepted: int) -> None:
        if drafted:
            self.rounds.append((drafted, accepted))

    @property
    def rate(self) -> float | None:
        drafted = sum(d for d, _ in self.rounds)
        return sum(a for _, a in self.rounds) / drafted if drafted else None


@dataclass
class RecentTotals:
    """The engine's speculation totals over the last `window_s` seconds: the cumulative totals
    now, less those of the oldest snapshot still inside the window."""

    window_s: float = DEFAULT_RECENT_WINDOW_S
    snapshots: deque = field(default_factory=deque)  # (time, SpecStats)

    def update(self, now: float, totals: SpecStats) -> SpecStats:
        if not self.snapshots or now - self.snapshots[-1][0] >= DEFAULT_SNAPSHOT_EVERY_S:
            self.snapshots.append((now, totals.copy()))
        while len(self.snapshots) > 1 and now - self.snapshots[1][0] >= self.window_s:
            self.snapshots.popleft()
        oldest = self.snapshots[0][1] if now - self.snapshots[0][0] >= self.window_s else None
        return totals.minus(oldest) if oldest is not None else totals.copy()
