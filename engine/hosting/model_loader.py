"""Loading one model without stopping the others: the model is built with lazy weights (only
the weight files' headers are read, so its size is known before any memory is taken), its
tokenizer loads on a helper thread (no MLX there), and its weights are evaluated on the MLX
thread a few tensors at a time, between the other models' steps.

What a load still blocks the MLX thread for: building the lazy model (tens of ms), then one
slice at a time between the other models' steps: `slice_seconds` gives it half as long as a
recent step took (MIN_SLICE_S to MAX_SLICE_S), so the others' wait between tokens grows by at
most half while a load goes on, plus at most one tensor (the largest, the default model's
embedding, took 40-70 ms on the 2-core CPU). With nothing else running the slices follow each
other at once. The default model's first-run conversion from its GGUF file (seconds, once per
machine) runs inside `open` and does block.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx

from engine.models import LoadedModel, ModelLoadError, OpenedModel, load_tokenizer, open_model

log = logging.getLogger(__name__)

MIN_SLICE_S = 0.02  # MLX-thread time a load takes between two engine steps, at least
MAX_SLICE_S = 0.1  # and at most
LOAD_SHARE = 0.5  # of a recent step's time: how much longer the others wait while a load runs
OPEN_SHARE = 0.05  # of the progress bar: building the lazy model
TOKENIZER_SHARE = 0.05  # waiting for the tokenizer after the weights

Done = Callable[[Any, BaseException | None], None]
Progress = Callable[[str, float], None]


def slice_seconds(recent_step_s: float) -> float:
    """How long a load may hold the MLX thread between two steps that take `recent_step_s`."""
    return min(MAX_SLICE_S, max(MIN_SLICE_S, LOAD_SHARE * recent_step_s))


@dataclass
class LoadJob:
    """One model being loaded: who waits for it, and how far it got."""

    key: str
    spec: str | None
    name: str
    waiters: list[str] = field(default_factory=list)  # request ids, told the progress
    callers: list[Done] = field(default_factory=list)  # Engine.load_model calls
    pin: bool = False
    message: str = "Waiting to load"
    fraction: float = 0.0
    opened: OpenedModel | None = None
    tokenizer: Future | None = None
    _todo: list[mx.array] = field(default_factory=list)
    _total: int = 0
    _done: int = 0

    @property
    def wanted(self) -> bool:
        """Someone still waits for it (a request not cancelled, or a caller)."""
        return bool(self.waiters or self.callers)

    @property
    def needs_bytes(self) -> int:
        """What its weights take once evaluated (known once opened)."""
        return self._total

    def open(self, tokenizers: ThreadPoolExecutor, progress: Progress) -> int:
        """Build the model with lazy weights and start its tokenizer; returns the bytes its
        weights will take. Raises ModelLoadError."""
        self._report(progress, "Opening", 0.0)
        try:
            self.opened = open_model(self.spec, progress=lambda m, f: self._report(progress, m, f))
        except ModelLoadError:
            raise
        except Exception as exc:  # noqa: BLE001 - a bad spec or folder: the user's message
            raise ModelLoadError(f"Could not load {self.name}: {exc}") from exc
        self.name = self.opened.name
        self._todo = self.opened.weights
        self._total = sum(a.nbytes for a in self._todo)
        self.tokenizer = tokenizers.submit(load_tokenizer, self.opened)
        self._report(progress, "Reading weights", OPEN_SHARE)
        return self._total

    def advance(self, slice_s: float, progress: Progress) -> LoadedModel | None:
        """Evaluate weights for about `slice_s`; the loaded model once every weight is read
        and the tokenizer is ready, else None. Raises ModelLoadError."""
        deadline = time.perf_counter() + slice_s
        try:
            while self._todo and time.perf_counter() < deadline:
                array = self._todo.pop()
                mx.eval(array)
                self._done += array.nbytes
        except Exception as exc:  # noqa: BLE001 - e.g. a truncated weight file
            raise ModelLoadError(f"Could not read the weights of {self.name}: {exc}") from exc
        if self._todo:
            share = 1.0 - OPEN_SHARE - TOKENIZER_SHARE
            fraction = OPEN_SHARE + share * self._done / max(1, self._total)
            self._report(progress, "Reading weights", fraction)
            return None
        assert self.opened is not None and self.tokenizer is not None
        if not self.tokenizer.done():
            self._report(progress, "Loading the tokenizer", 1.0 - TOKENIZER_SHARE)
            return None
        loaded = self.opened.finish(self.opened.model, self.tokenizer.result())
        self._report(progress, "Ready", 1.0)
        return loaded

    def abandon(self) -> None:
        """Drop what was built (nothing waits for it any more, or it failed)."""
        self.opened, self._todo = None, []
        if self.tokenizer is not None:
            self.tokenizer.cancel()

    def _report(self, progress: Progress, message: str, fraction: float) -> None:
        self.message, self.fraction = message, fraction
        progress(message, fraction)
