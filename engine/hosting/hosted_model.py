"""One loaded model: its weights, the names requests call it by, whether it is pinned, when it
was last used, and (once a request runs on it) its EngineCore."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from engine.requests import SpecStats

DEFAULT_RATE_WINDOW_S = 3.0


@dataclass
class TokenRate:
    """Tokens per second over the last DEFAULT_RATE_WINDOW_S, from a running total."""

    samples: deque = field(default_factory=deque)

    def add(self, now: float, total: int) -> float:
        self.samples.append((now, total))
        while self.samples and now - self.samples[0][0] > DEFAULT_RATE_WINDOW_S:
            self.samples.popleft()
        t0, n0 = self.samples[0]
        return (total - n0) / (now - t0) if now > t0 else 0.0


@dataclass
class HostedModel:
    """A loaded model, as the pool keeps it."""

    key: str
    loaded: Any  # engine.models.LoadedModel
    specs: set[str] = field(default_factory=set)  # what requests called it ("" for None)
    pinned: bool = False
    core: Any = None  # engine.core.engine_core.EngineCore, made when a request first runs on it
    last_used: float = field(default_factory=time.monotonic)
    rate: TokenRate = field(default_factory=TokenRate)
    drafts: set[str] = field(default_factory=set)  # keys of draft models in its core
    refused_drafts: dict[str, str] = field(default_factory=dict)  # draft key -> why

    @property
    def name(self) -> str:
        return self.loaded.info.name

    @property
    def weights_bytes(self) -> int:
        return self.loaded.info.bytes

    def has_work(self) -> bool:
        return self.core is not None and self.core.has_work()

    def cache_bytes(self) -> int:
        return self.core.cache_bytes() if self.core is not None else 0

    def touch(self) -> None:
        self.last_used = time.monotonic()


@dataclass
class RetiredTotals:
    """What the cores of unloaded models counted, so that the engine's totals never drop."""

    spec: SpecStats = field(default_factory=SpecStats)
    generated_tokens: int = 0
    steps: int = 0

    def add(self, core: Any) -> None:
        self.spec.add(core.scheduler.spec_snapshot())
        self.generated_tokens += core.scheduler.out.generated_tokens
        self.steps += core.scheduler.steps
