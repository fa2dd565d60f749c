"""Whether a batch's verify rounds run ahead or in series, chosen from what each way measured.

Rounds ahead (engine/core/lookahead.py) hide the host's drafting and graph building behind the
device's forward, and pay for it with rounds drafted on a guess that proves wrong. Which wins
depends on the model and the machine, even between two H100s: on one, a random 8B at four rows
gave 2.4-2.6x plain ahead against 1.7-1.9x in series; on the next, the same run gave 2.06x
against 2.53x (docs/benchmarks.md, eleventh pass). So nothing is assumed: for each batch size
the choice times both ways in alternating legs of a few rounds, takes the way that gave more
tokens per second (the median leg), and every so often times both again (the rows' acceptance
and lengths change as a chat goes on). A trial whose first four legs show a clear winner stops
there: its rounds are spent on the slower way half of the time.

A round's cost is all the wall time from its step's start to the next step's (as auto's prices:
the host's work between steps included), and its tokens are those the step reported. Steps where
rows leave count too: there the rounds ahead drain and start again, which serial rounds never
pay (on an H100 that made ahead slower overall where its steady rounds cost the same). The
first round after a switch of way is not counted: switching to rounds ahead reports nothing in
that round, and switching back reports two rounds' tokens at once.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field

DEFAULT_LEG_ROUNDS = 6  # rounds timed in a row one way, after the switch's own round
# legs of a trial, the ways alternating: a round keeps 1 to k+1 tokens, so a few are noisy, and
# alternating spreads drift (a cold start's first forwards, other load) over both ways
DEFAULT_TRIAL_LEGS = 8
DEFAULT_RETRY_EVERY = 512  # rounds the chosen way runs before the other is timed again
# each way's latest legs (this trial's four, the last trial's last two): a way's price is their
# median, so a leg with a slow outlier (on CUDA a forward of a new shape builds its graph, up to
# a second) does not decide, and the newest legs outnumber the older
DEFAULT_LEGS_KEPT = 6
# after two legs each way, a trial ends early where every leg of one way beat every leg of the
# other by this factor: a clear winner need not pay the other way's four more legs
DEFAULT_CLEAR_MARGIN = 1.2
DEFAULT_EARLY_LEGS = 4


def batch_bucket(rows: int) -> int:
    """Batch sizes that share a choice: 1, 2-3, 4-7, 8-15, ... (powers of two)."""
    return max(rows, 1).bit_length()


def trial_legs(*, first: bool) -> list[bool]:
    """The ways of a trial's legs in turn, `first` first."""
    return [first if i % 2 == 0 else not first for i in range(DEFAULT_TRIAL_LEGS)]


@dataclass
class WayTiming:
    """The counted rounds run one way (ahead or in series): seconds per token of each leg."""

    legs: deque[float] = field(default_factory=lambda: deque(maxlen=DEFAULT_LEGS_KEPT))
    seconds: float = 0.0  # of the leg being timed
    tokens: int = 0
    rounds: int = 0  # counted, in all

    def add(self, seconds: float, tokens: int) -> None:
        self.seconds += seconds
        self.tokens += tokens
        self.rounds += 1

    def end_leg(self) -> None:
        self.legs.append(self.seconds / self.tokens if self.tokens else float("inf"))
        self.seconds, self.tokens = 0.0, 0

    def seconds_per_token(self) -> float:
        return statistics.median(self.legs) if self.legs else float("inf")


@dataclass
class BucketChoice:
    """One batch-size bucket's timings both ways, and the way its rounds run now."""

    ways: dict[bool, WayTiming] = field(
        default_factory=lambda: {False: WayTiming(), True: WayTiming()}
    )
    # the ways still to time in this trial, the current one first (empty: the chosen way runs)
    pending: list[bool] = field(default_factory=lambda: trial_legs(first=False))
    ahead: bool = False  # the way rounds run now
    counted: int = 0  # rounds counted of the current trial's way
    since_choice: int = 0  # rounds on the chosen way since it was chosen


class AheadChoice:
    """Chooses per batch size whether verify rounds run ahead, from measured tokens per second."""

    def __init__(
        self,
        *,
        leg_rounds: int = DEFAULT_LEG_ROUNDS,
        retry_every: int = DEFAULT_RETRY_EVERY,
    ) -> None:
        self.leg_rounds = leg_rounds
        self.retry_every = retry_every
        self.buckets: dict[int, BucketChoice] = {}
        self._last_way: bool | None = None  # the way the last round recorded ran

    def wants_ahead(self, rows: int) -> bool:
        """The way this batch's next round runs."""
        return self.buckets.setdefault(batch_bucket(rows), BucketChoice()).ahead

    def record(self, rows: int, *, ahead: bool, seconds: float, tokens: int) -> None:
        """A round of `rows` rows, run `ahead` or not, took `seconds` and reported `tokens`."""
        bucket = self.buckets.get(batch_bucket(rows))
        switched, self._last_way = self._last_way != ahead, ahead
        if bucket is None or bucket.ahead != ahead or switched:
            return  # not the way this bucket runs now, or a switch's own round
        if bucket.pending:
            way = bucket.ways[ahead]
            way.add(seconds, tokens)
            bucket.counted += 1
            if bucket.counted >= self.leg_rounds:
                way.end_leg()
                bucket.pending.pop(0)
                bucket.counted = 0
                if bucket.pending and not self._clear_early(bucket):
                    bucket.ahead = bucket.pending[0]
                else:
                    bucket.pending = []
                    self._choose(bucket)
            return
        bucket.since_choice += 1
        if bucket.since_choice >= self.retry_every:  # both ways again, the other one first
            bucket.pending = trial_legs(first=not bucket.ahead)
            bucket.ahead = bucket.pending[0]

    @staticmethod
    def _clear_early(bucket: BucketChoice) -> bool:
        """Whether the trial's first legs already show a clear winner (DEFAULT_CLEAR_MARGIN)."""
        if DEFAULT_TRIAL_LEGS - len(bucket.pending) != DEFAULT_EARLY_LEGS:
            return False
        half = DEFAULT_EARLY_LEGS // 2
        serial, ahead = (list(bucket.ways[w].legs)[-half:] for w in (False, True))
        return max(ahead) * DEFAULT_CLEAR_MARGIN <= min(serial) or (
            max(serial) * DEFAULT_CLEAR_MARGIN <= min(ahead)
        )

    @staticmethod
    def _choose(bucket: BucketChoice) -> None:
        serial, ahead = bucket.ways[False], bucket.ways[True]
        bucket.ahead = ahead.seconds_per_token() < serial.seconds_per_token()
        bucket.since_choice = 0

    def summary(self) -> dict[str, dict]:
        """Per batch-size bucket: the way chosen and each way's milliseconds per token."""
        out = {}
        for key, bucket in sorted(self.buckets.items()):
            out[str(1 << (key - 1))] = {  # the bucket's smallest batch size
                "ahead": bucket.ahead,  # the way running now
                "timing_both": bool(bucket.pending),  # still timing both ways (else: chosen)
                "serial_ms_per_token": _ms(bucket.ways[False]),
                "ahead_ms_per_token": _ms(bucket.ways[True]),
            }
        return out


def _ms(way: WayTiming) -> float | None:
    spt = way.seconds_per_token()
    return None if spt == float("inf") else round(1e3 * spt, 3)
