"""A choice between two ways of running the engine's steps, made per batch size from what each
way measured, not assumed (verify rounds ahead or in series, engine/core/ahead_choice.py; the
attention of a ragged decode step, engine/core/decode_attention_choice.py).

For each batch size the choice times both ways in alternating legs of a few steps, takes the way
that gave more tokens per second (the median leg), and every so often times both again (the
rows' lengths and acceptance change as a chat goes on). A trial whose first four legs show a
clear winner stops there: its steps are spent on the slower way half of the time.

A step's cost is all the wall time from its start to the next step's (the host's work between
steps included), and its tokens are those the step reported. The first step after a switch of
way is not counted: the engine's steps are pipelined, so it still carries the other way's work
(rounds ahead report nothing in the first round and two rounds' tokens when switched back).
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field

DEFAULT_LEG_STEPS = 6  # steps timed in a row one way, after the switch's own step
# legs of a trial, the ways alternating: a step keeps 1 to k+1 tokens a row, so a few are noisy,
# and alternating spreads drift (a cold start's first forwards, other load) over both ways
DEFAULT_TRIAL_LEGS = 8
DEFAULT_RETRY_EVERY = 512  # steps the chosen way runs before the other is timed again
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
    """The counted steps run one way: seconds per token of each leg."""

    legs: deque[float] = field(default_factory=lambda: deque(maxlen=DEFAULT_LEGS_KEPT))
    seconds: float = 0.0  # of the leg being timed
    tokens: int = 0
    rounds: int = 0  # steps counted, in all

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
    """One batch-size bucket's timings both ways, and the way its steps run now."""

    ways: dict[bool, WayTiming] = field(
        default_factory=lambda: {False: WayTiming(), True: WayTiming()}
    )
    # the ways still to time in this trial, the current one first (empty: the chosen way runs)
    pending: list[bool] = field(default_factory=lambda: trial_legs(first=False))
    way: bool = False  # the way steps run now
    counted: int = 0  # steps counted of the current trial's way
    since_choice: int = 0  # steps on the chosen way since it was chosen


class MeasuredChoice:
    """Chooses per batch size between two ways (False, True), from measured tokens per second."""

    # the two ways' names in `summary`: the way running now is reported under the second
    names: tuple[str, str] = ("off", "on")
    # a way kept unless the other measured faster per token by more than `margin` (ties, which
    # legs of a few steps cannot resolve, go to it); None: the faster way, however close
    prefer: bool | None = None
    margin: float = 1.0

    def __init__(
        self, *, leg_steps: int = DEFAULT_LEG_STEPS, retry_every: int = DEFAULT_RETRY_EVERY
    ) -> None:
        self.leg_steps = leg_steps
        self.retry_every = retry_every
        self.buckets: dict[int, BucketChoice] = {}
        self._last_way: bool | None = None  # the way the last step recorded ran

    def way(self, rows: int) -> bool:
        """The way this batch's next step runs."""
        return self.buckets.setdefault(batch_bucket(rows), BucketChoice()).way

    def record_way(self, rows: int, *, way: bool, seconds: float, tokens: int) -> None:
        """A step of `rows` rows, run `way`, took `seconds` and reported `tokens`."""
        bucket = self.buckets.get(batch_bucket(rows))
        switched, self._last_way = self._last_way != way, way
        if bucket is None or bucket.way != way or switched:
            return  # not the way this bucket runs now, or a switch's own step
        if bucket.pending:
            timing = bucket.ways[way]
            timing.add(seconds, tokens)
            bucket.counted += 1
            if bucket.counted >= self.leg_steps:
                timing.end_leg()
                bucket.pending.pop(0)
                bucket.counted = 0
                if bucket.pending and not self._clear_early(bucket):
                    bucket.way = bucket.pending[0]
                else:
                    bucket.pending = []
                    self._choose(bucket)
            return
        bucket.since_choice += 1
        if bucket.since_choice >= self.retry_every:  # both ways again, the other one first
            bucket.pending = trial_legs(first=not bucket.way)
            bucket.way = bucket.pending[0]

    def _clear_early(self, bucket: BucketChoice) -> bool:
        """Whether the trial's first legs already show a clear winner: every leg of one way
        faster than every leg of the other by DEFAULT_CLEAR_MARGIN, or at all for the way
        `prefer`red (the other could not be chosen)."""
        if DEFAULT_TRIAL_LEGS - len(bucket.pending) != DEFAULT_EARLY_LEGS:
            return False
        half = DEFAULT_EARLY_LEGS // 2
        legs = {way: list(bucket.ways[way].legs)[-half:] for way in (False, True)}
        for way in (False, True):
            factor = 1.0 if way == self.prefer else DEFAULT_CLEAR_MARGIN
            if max(legs[way]) * factor <= min(legs[not way]):
                return True
        return False

    def _choose(self, bucket: BucketChoice) -> None:
        price = {way: timing.seconds_per_token() for way, timing in bucket.ways.items()}
        if self.prefer is None:
            bucket.way = price[True] < price[False]
        else:
            other = not self.prefer
            bucket.way = other if price[other] * self.margin < price[self.prefer] else self.prefer
        bucket.since_choice = 0

    def summary(self) -> dict[str, dict]:
        """Per batch-size bucket: the way chosen and each way's milliseconds per token."""
        off, on = self.names
        out = {}
        for key, bucket in sorted(self.buckets.items()):
            out[str(1 << (key - 1))] = {  # the bucket's smallest batch size
                on: bucket.way,  # the way running now
                "timing_both": bool(bucket.pending),  # still timing both ways (else: chosen)
                f"{off}_ms_per_token": _ms(bucket.ways[False]),
                f"{on}_ms_per_token": _ms(bucket.ways[True]),
            }
        return out


def _ms(way: WayTiming) -> float | None:
    spt = way.seconds_per_token()
    return None if spt == float("inf") else round(1e3 * spt, 3)
