"""Python's cyclic garbage collector, run on the GUI thread only.

CPython runs its cyclic collector on whichever thread trips the allocation threshold. In Tandem
that is often the MLX thread (it allocates the most), and a cycle that holds a Qt object (a
widget and a lambda connected to its signal) is then destroyed there: Qt objects must die on
the thread that owns them, and PySide6 crashes when they do not (seen as a segfault inside
mlx-lm's make_prompt_cache). So the app turns automatic collection off and collects on a Qt
timer, mirroring CPython's own thresholds (the pattern of pyqtgraph's GarbageCollector).
"""

from __future__ import annotations

import gc
import logging

from PySide6.QtCore import QObject, QTimer

DEFAULT_INTERVAL_MS = 250  # often enough that young garbage never piles up

log = logging.getLogger(__name__)


class GuiThreadCollector(QObject):
    """Runs Python's cyclic garbage collection on the GUI thread, on a timer."""

    def __init__(self, *, interval_ms: int = DEFAULT_INTERVAL_MS, parent: QObject | None = None):
        super().__init__(parent)
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.collect_due)
        self._was_enabled: bool | None = None  # None: not started
        self.collections = 0

    @property
    def running(self) -> bool:
        return self._was_enabled is not None

    def start(self) -> None:
        """Take collection over from CPython's allocation trigger."""
        if self.running:
            return
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._timer.start()

    def stop(self) -> None:
        """Give collection back (as it was before `start`), after a last full collection."""
        if not self.running:
            return
        self._timer.stop()
        self.collect(2)
        if self._was_enabled:
            gc.enable()
        self._was_enabled = None

    def collect_due(self) -> int:
        """Collect the oldest generation whose threshold is crossed, as CPython would have;
        the number of objects found unreachable."""
        thresholds = gc.get_threshold()
        counts = gc.get_count()
        generation = -1
        for gen in range(3):
            if counts[gen] > thresholds[gen] > 0:
                generation = gen
        if generation < 0:
            return 0
        return self.collect(generation)

    def collect(self, generation: int = 2) -> int:
        """Collect now, on this (the GUI) thread: after a model is unloaded, say."""
        self.collections += 1
        found = gc.collect(generation)
        if found and generation == 2:
            log.debug("full collection: %d unreachable objects", found)
        return found
