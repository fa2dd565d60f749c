"""For benchmarks only: a SYNTHETIC drafter with a set acceptance rate.

It proposes the target's own greedy continuation (known in advance from a greedy reference run
that the benchmark passes in `SpeculativeParams.synthetic_reference`), corrupting each token with
probability 1 - p, so the engine's speed can be charted against acceptance on any machine.
"""

from __future__ import annotations

import random

from engine.request_state import RequestState


class SyntheticDrafter:
    name = "synthetic"

    def __init__(self, *, vocab_size: int, seed: int = 0) -> None:
        self.vocab_size = vocab_size
        self._rng = random.Random(seed)

    def propose(self, row: RequestState, k: int) -> list[int]:
        spec = row.request.speculative
        reference = spec.synthetic_reference
        # generated ends with the pending input token, which the reference already holds
        start = len(row.generated)
        truth = list(reference[start : start + k])
        p = spec.synthetic_acceptance
        return [
            t
            if self._rng.random() < p
            else (t + 1 + self._rng.randrange(self.vocab_size - 1)) % self.vocab_size
            for t in truth
        ]

    def observe(self, row: RequestState, drafted: list[int], accepted: int) -> None:
        pass
