"""How late the Qt event loop runs a timer: a QTimer fires every `interval_ms` and records how
much later than asked each tick arrived. A busy or blocked GUI thread shows up as lateness."""

from __future__ import annotations

import time
from dataclasses import dataclass

from PySide6.QtCore import QObject, Qt, QTimer

DEFAULT_INTERVAL_MS = 10


@dataclass(frozen=True)
class LatencyReport:
    samples: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    mean_ms: float

    def __str__(self) -> str:
        return (
            f"event-loop latency over {self.samples} ticks: p50 {self.p50_ms:.1f} ms, "
            f"p90 {self.p90_ms:.1f} ms, p99 {self.p99_ms:.1f} ms, max {self.max_ms:.1f} ms"
        )


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), linear between the closest ranks."""
    if not values:
        return 0.0
    ordered = sorted(values)
    at = (len(ordered) - 1) * q / 100.0
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


class LatencyProbe(QObject):
    def __init__(self, *, interval_ms: int = DEFAULT_INTERVAL_MS, parent: QObject | None = None):
        super().__init__(parent)
        self.interval_ms = interval_ms
        self.lateness_ms: list[float] = []
        self._timer = QTimer(self)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self._tick)
        self._last = 0.0

    def start(self) -> None:
        self.lateness_ms.clear()
        self._last = time.perf_counter()
        self._timer.start()

    def stop(self) -> LatencyReport:
        self._timer.stop()
        return self.report()

    @property
    def running(self) -> bool:
        return self._timer.isActive()

    def _tick(self) -> None:
        now = time.perf_counter()
        late = (now - self._last) * 1000.0 - self.interval_ms
        self.lateness_ms.append(max(0.0, late))
        self._last = now

    def report(self) -> LatencyReport:
        values = self.lateness_ms
        return LatencyReport(
            samples=len(values),
            p50_ms=percentile(values, 50),
            p90_ms=percentile(values, 90),
            p99_ms=percentile(values, 99),
            max_ms=max(values, default=0.0),
            mean_ms=sum(values) / len(values) if values else 0.0,
        )
