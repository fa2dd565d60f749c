"""A daemon thread that handles queued jobs one at a time (the disk tier's reader and writer)."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


class BackgroundQueue:
    """Runs `handle(job)` on its own thread for every job put, in order; never touches MLX."""

    def __init__(self, name: str, handle: Callable[[Any], None]) -> None:
        self.name = name
        self._handle = handle
        self._queue: queue.Queue[Any] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, job: Any) -> None:
        self._queue.put(job)

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            if isinstance(job, threading.Event):
                job.set()
                continue
            try:
                self._handle(job)
            except Exception:  # noqa: BLE001 - the thread must outlive one bad job
                log.exception("%s: a job failed", self.name)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for the jobs queued so far; False when `timeout` passed first."""
        if not self._thread.is_alive():
            return True
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout)

    def close(self, timeout: float | None) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout)
