"""What work of each size has cost lately, and which step was a one-off.

The prefill pacer (engine/core/prefill_pacer.py) and a drafter's catch-up pacer
(engine/speculative/catch_up_pacer.py) size each step's work from what the last one took. One
step with a one-off cost (on CUDA a graph built for a forward of a new length, another process
on the machine) read as the price of its tokens halved the budget, and on CUDA the halved size
was one never built, itself a stall: an H100 went 256, 128, 64, 32 tokens a step at 54-61 ms
each beside a 10-ms decode step. Sizes are grouped by power of two; each keeps its latest
steps, and a step far above their median is priced at the median.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field

# the latest steps of each size whose median is its cost: a running mean let one step with a
# one-off cost price that size for many steps after
DEFAULT_COST_SAMPLES = 5
DEFAULT_ONE_OFF_FACTOR = 2.0  # a step dearer than this many times its size's median: a one-off
DEFAULT_ONE_OFF_SAMPLES = 3  # a size's steps before its median can call one a one-off


@dataclass
class SizeCosts:
    """The latest (tokens, seconds) of each size, by power of two, and their medians."""

    samples: int = DEFAULT_COST_SAMPLES
    by_size: dict[int, deque[tuple[int, float]]] = field(default_factory=dict)

    def remember(self, tokens: int, seconds: float) -> None:
        """One step's `tokens` took `seconds`."""
        seen = self.by_size.setdefault(tokens.bit_length(), deque(maxlen=self.samples))
        seen.append((tokens, seconds))

    def median(self, tokens: int, *, least: int = 1) -> float | None:
        """`tokens` priced at the median rate of the latest steps of their size (None: fewer
        than `least` of them)."""
        seen = self.by_size.get(tokens.bit_length(), ())
        return tokens * statistics.median(s / n for n, s in seen) if len(seen) >= least else None

    def usual(self, tokens: int, seconds: float) -> float:
        """What a remembered step of `tokens` usually costs: its `seconds`, unless they are a
        one-off against the median of its size's latest steps (itself among them)."""
        median = self.median(tokens, least=DEFAULT_ONE_OFF_SAMPLES)
        if median is None or seconds <= DEFAULT_ONE_OFF_FACTOR * median:
            return seconds
        return median

    def points(self) -> list[tuple[float, float]]:
        """Each size's median tokens and median seconds (a cost line's points)."""
        return [
            (statistics.median(n for n, _ in seen), statistics.median(s for _, s in seen))
            for seen in self.by_size.values()
        ]

    def count(self) -> int:
        """Steps remembered, over all sizes."""
        return sum(len(seen) for seen in self.by_size.values())
