"""Whether a batch's verify rounds run ahead or in series, chosen from what each way measured.

Rounds ahead (engine/core/lookahead.py) hide the host's drafting and graph building behind the
device's forward, and pay for it with rounds drafted on a guess that proves wrong. Which wins
depends on the model and the machine, even between two H100s: on one, a random 8B at four rows
gave 2.4-2.6x plain ahead against 1.7-1.9x in series; on the next, the same run gave 2.06x
against 2.53x (docs/benchmarks.md, eleventh pass). So each batch size times both ways and keeps
the faster (engine/core/measured_choice.py).

A round's cost is all the wall time from its step's start to the next step's (as auto's prices:
the host's work between steps included). Steps where rows leave count too: there the rounds
ahead drain and start again, which serial rounds never pay (on an H100 that made ahead slower
overall where its steady rounds cost the same).
"""

from __future__ import annotations

from engine.core.measured_choice import (
    DEFAULT_LEG_STEPS,
    DEFAULT_RETRY_EVERY,
    MeasuredChoice,
    batch_bucket,
)

__all__ = ["AheadChoice", "batch_bucket"]


class AheadChoice(MeasuredChoice):
    """Chooses per batch size whether verify rounds run ahead, from measured tokens per second."""

    names = ("serial", "ahead")

    def __init__(
        self, *, leg_rounds: int = DEFAULT_LEG_STEPS, retry_every: int = DEFAULT_RETRY_EVERY
    ) -> None:
        super().__init__(leg_steps=leg_rounds, retry_every=retry_every)

    def wants_ahead(self, rows: int) -> bool:
        """The way this batch's next round runs."""
        return self.way(rows)

    def record(self, rows: int, *, ahead: bool, seconds: float, tokens: int) -> None:
        """A round of `rows` rows, run `ahead` or not, took `seconds` and reported `tokens`."""
        self.record_way(rows, way=ahead, seconds=seconds, tokens=tokens)
