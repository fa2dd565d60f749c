"""For benchmarks and tests only: a drafter with a set acceptance rate.

It proposes the target's own greedy continuation of a prompt (known in advance from a greedy
reference run: `expect`), corrupting each token with probability 1 - acceptance, so the engine's
speed can be charted against acceptance on any machine. Register it with
`EngineConfig(extra_drafters=drafter.entry())`; requests ask for it with method "synthetic".
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from engine.requests import SpecMethod
from engine.speculative.drafter import Drafter, DraftRow


class SyntheticDrafter(Drafter):
    """Drafts the known greedy reply, each token corrupted with probability 1 - acceptance."""

    name = SpecMethod.SYNTHETIC.value
    kind = SpecMethod.SYNTHETIC.value
    drafts_ahead = True

    def __init__(self, *, vocab_size: int, seed: int = 0) -> None:
        self.vocab_size = vocab_size
        self._rng = random.Random(seed)
        self._plans: dict[tuple[int, ...], tuple[tuple[int, ...], float]] = {}

    def entry(self) -> tuple[tuple[str, Any], ...]:
        """For EngineConfig.extra_drafters."""
        return ((self.name, lambda _target: self),)

    def expect(self, prompt: Sequence[int], reference: Sequence[int], acceptance: float) -> None:
        """Rows with this prompt draft from `reference` (its greedy reply), kept with
        probability `acceptance` per token."""
        self._plans[tuple(prompt)] = (tuple(reference), acceptance)

    def propose(self, rows: list[DraftRow]) -> list[list[int]]:
        return [self._propose(row) for row in rows]

    def _propose(self, row: DraftRow) -> list[int]:
        plan = self._plans.get(tuple(row.prompt))
        if plan is None:
            return []
        reference, p = plan
        # generated ends with the pending input token, which the reference already holds
        start = len(row.generated)
        truth = list(reference[start : start + row.k])
        return [
            t
            if self._rng.random() < p
            else (t + 1 + self._rng.randrange(self.vocab_size - 1)) % self.vocab_size
            for t in truth
        ]
