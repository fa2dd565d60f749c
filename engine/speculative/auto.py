"""The "auto" method: pick k every round from each row's recent acceptance and the measured cost
of verifying k+1 tokens against 1; stop speculating while it loses.

With per-token acceptance a, k drafts yield (1 - a^(k+1)) / (1 - a) tokens per target forward
(the bonus token included), when the drafter finds a draft at all: prompt lookup finds none for
a row whose last tokens match nothing earlier, and that row gets its one token from the round's
wide forward. Each row's share of rounds with a draft is learned too, and prices its drafts (on
the CPU's chat prompts at four chats lookup had nothing for 30% of the rows it was asked for,
and auto, pricing them as drafting, ran 0.91x plain). A round over k+1 tokens per row costs
cost(B, k+1) / cost(B, 1) of a plain step at batch size B, measured as the engine runs: the
whole round's wall time (drafting, forward, acceptance, rollback), since that is what a plain
step is weighed against. All rows of a batch share the forward's width: the width chosen is
the one that maximises the auto rows' summed tokens per unit of cost, and within it each row
drafts only the positions it is likely enough to keep (a row that is rarely accepted drafts
less or nothing while its neighbours draft more); plain decoding unless some width beats it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

DEFAULT_PRIOR_ACCEPTANCE = 0.6
DEFAULT_PRIOR_TRIALS = 2.0  # the prior's weight, in trials
DEFAULT_PRIOR_FOUND = 1.0  # a drafter is taken to find a draft until it is seen not to
DEFAULT_DECAY = 0.8  # weight of the past in the acceptance counts
DEFAULT_WINDOW = 8  # timings kept per (batch, width)
DEFAULT_PROBE_EVERY = 32  # plain rounds before trying speculation again
# where each new shape is dear (CUDA: a graph and kernels to build, 5x a step and more) auto
# verifies at these widths only: with every width up to 17 allowed, its rounds on the H200 were
# mostly first-time shapes (19-47 ms against 5-6 ms for fixed lookup's width 5) and it judged
# speculation a loss. Elsewhere every width (on the CPU, capping a trained head's 3 drafts to
# 2 cost a fifth of auto's gain at one chat).
DEFAULT_FEW_WIDTHS = (2, 3, 5, 9, 17)
DEFAULT_COST_SLOPE = 0.15  # extra cost per verified token until measured (CPU: 5 tokens 1.6x)
MIN_GAIN = 1.03  # speculate only for a clear win
DEFAULT_MIN_MARGINAL = 0.1  # a draft position kept less often than this is not proposed


@dataclass
class CostModel:
    """Seconds per step (a plain step, or a verify round with its drafting) by (batch size,
    width): the least of each shape's last few timings."""

    # The least, not a mean: the slow timings of a shape are one-off costs it does not pay again
    # (on CUDA a graph or cuDNN plan built for it, 5x a step and more, sometimes at its second
    # run too; a collection pause), and one such timing averaged in kept auto off a width for
    # good (measured on the H200: a 20 ms width-2 round priced every width at 5x a 4 ms step,
    # where the rounds that followed took 10 ms). A lasting change shows once the window has
    # moved past the older timings.
    samples: dict[tuple[int, int], deque[float]] = field(default_factory=dict)
    seconds: dict[tuple[int, int], float] = field(default_factory=dict)  # each shape's cost
    # each shape's first timing is left out altogether: it pays for building the shape
    _first_seen: set[tuple[int, int]] = field(default_factory=set)

    def record(self, batch: int, width: int, seconds: float) -> None:
        key = (batch, width)
        if key not in self._first_seen:
            self._first_seen.add(key)
            return
        window = self.samples.setdefault(key, deque(maxlen=DEFAULT_WINDOW))
        window.append(seconds)
        self.seconds[key] = min(window)

    def relative(self, batch: int, width: int) -> float:
        """cost(batch, width) / cost(batch, 1). The widths measured at this batch size price
        the rest: between two, on the line joining them; past the widest, its cost plus the
        measured slope per extra token (a round's fixed cost, large on a GPU, is paid at every
        width), so a wider width is tried and then known. A batch size with none measured yet
        (rows join and leave all the time) takes the extra seconds a round cost over a plain
        step at the nearest batch size that has them. With nothing measured, a slope that
        grows with batch, at most `width` steps."""
        if width <= 1:
            return 1.0
        known = self._known(batch)
        if known is None:
            return min(1.0 + DEFAULT_COST_SLOPE * (width - 1) * batch, float(width))
        if width in known:
            return known[width]
        below = max(w for w in known if w < width)
        above = [w for w in known if w > width]
        if above:
            w2 = min(above)
            t = (width - below) / (w2 - below)
            return known[below] + t * (known[w2] - known[below])
        verified = sorted(w for w in known if w > 1)
        slope = DEFAULT_COST_SLOPE
        if len(verified) >= 2:
            w1, w2 = verified[-2:]
            slope = max((known[w2] - known[w1]) / (w2 - w1), 0.0)
        return known[below] + slope * (width - below)

    def measured(self, batch: int) -> bool:
        """Whether `relative` at this batch size rests on timings, not the default slope."""
        return self._known(batch) is not None

    def _known(self, batch: int) -> dict[int, float] | None:
        """{width: relative cost} at `batch` from its own timings, else from the nearest batch
        size's (its rounds' extra seconds over its plain step, added to this batch's plain
        step: a round's fixed cost does not grow with the batch, so this errs towards trying
        a width, which then gets measured); None when there is nothing to go on."""
        seconds = self.seconds
        base = seconds.get((batch, 1))
        if not base:
            return None
        sizes = {b for (b, w) in seconds if w > 1 and seconds.get((b, 1))}
        if not sizes:
            return None
        nearest = (
            batch if batch in sizes else min(sizes, key=lambda b: (abs(math.log(b / batch)), b))
        )
        extra_base = seconds[(nearest, 1)]
        known = {1: 1.0}
        for (b, w), value in seconds.items():
            if b == nearest and w > 1:
                known[w] = max((base + value - extra_base) / base, 1.0)
        return known


@dataclass
class RowAcceptance:
    """Per-token acceptance as decayed success / trial counts (a run of a accepted drafts
    followed by a rejection is a + 1 trials), and the decayed share of requests for a draft
    that found one."""

    successes: float = DEFAULT_PRIOR_ACCEPTANCE * DEFAULT_PRIOR_TRIALS
    trials: float = DEFAULT_PRIOR_TRIALS
    found: float = DEFAULT_PRIOR_FOUND * DEFAULT_PRIOR_TRIALS
    asked: float = DEFAULT_PRIOR_TRIALS

    @classmethod
    def starting_at(cls, rate: float, found_rate: float = DEFAULT_PRIOR_FOUND) -> RowAcceptance:
        """A new row's counts: `rate` and `found_rate`, weighted as the default prior is."""
        return cls(
            successes=rate * DEFAULT_PRIOR_TRIALS,
            trials=DEFAULT_PRIOR_TRIALS,
            found=found_rate * DEFAULT_PRIOR_TRIALS,
        )

    @property
    def rate(self) -> float:
        return self.successes / self.trials if self.trials else DEFAULT_PRIOR_ACCEPTANCE

    @property
    def found_rate(self) -> float:
        """The share of requests for a draft that found one."""
        return self.found / self.asked if self.asked else DEFAULT_PRIOR_FOUND

    def update(self, drafted: int, accepted: int) -> None:
        """A verified draft of `drafted` tokens (0: none, which says nothing) kept `accepted`."""
        if drafted <= 0:
            return
        self._ask(found=True)
        trials = accepted + (1 if accepted < drafted else 0)
        self.successes = DEFAULT_DECAY * self.successes + accepted
        self.trials = DEFAULT_DECAY * self.trials + trials

    def miss(self) -> None:
        """The drafter was asked for a draft and had none."""
        self._ask(found=False)

    def _ask(self, *, found: bool) -> None:
        self.found = DEFAULT_DECAY * self.found + (1.0 if found else 0.0)
        self.asked = DEFAULT_DECAY * self.asked + 1.0


def expected_tokens(rate: float, k: int, found: float = 1.0) -> float:
    """Tokens a row gets from a round with `k` drafts, a draft found with probability `found`."""
    if rate >= 0.999:
        drafted = k + 1.0
    else:
        drafted = (1.0 - rate ** (k + 1)) / (1.0 - rate)
    return 1.0 + found * (drafted - 1.0)


@dataclass
class AutoPolicy:
    """Chooses each auto row's k from the cost model and the rows' acceptance."""

    costs: CostModel = field(default_factory=CostModel)
    idle_rounds: int = 0
    few_widths: bool = False  # verify at DEFAULT_FEW_WIDTHS only (on CUDA)

    def choose(
        self,
        rates: list[float],
        batch: int,
        k_max: int,
        forced: Sequence[tuple[int, float]] = (),
        found: list[float] | None = None,
    ) -> list[int]:
        """A k for each auto row of a batch. `forced`: the widths the other rows' drafts would
        make the forward, each with the chance its drafter finds a draft (prompt lookup often
        has none, and then the forward is narrower); `found`: each auto row's chance (default:
        certain). The forward's width is priced for the whole batch; within it each row
        drafts only the positions it is likely enough to keep (a rarely accepted row drafts
        less, or nothing)."""
        if not rates:
            return []
        found = found if found is not None else [1.0] * len(rates)
        plain = len(rates) / self._expected_relative(batch, forced)
        best_ks, best = [0] * len(rates), plain * MIN_GAIN
        widths = DEFAULT_FEW_WIDTHS if self.few_widths else range(2, k_max + 2)
        for width in (w for w in widths if w <= k_max + 1):
            ks = [row_k(rate, width) for rate in rates]
            if self.few_widths:  # the forward's width stays one of them
                widest = max((w for w in widths if w <= max(ks) + 1), default=1)
                ks = [min(k, widest - 1) for k in ks]
            drafts = [(k + 1, f) for k, f in zip(ks, found) if k]
            gain = sum(expected_tokens(r, k, f) for r, k, f in zip(rates, ks, found))
            gain /= self._expected_relative(batch, [*forced, *drafts])
            if gain > best:
                best_ks, best = ks, gain
        if not any(best_ks):
            self.idle_rounds += 1
            if self.idle_rounds >= DEFAULT_PROBE_EVERY:
                self.idle_rounds = 0
                # probe: acceptance or costs may have changed. One draft each, cheap where a
                # round's fixed cost is small; the acceptance it measures then widens the rounds
                return [1] * len(rates)
        else:
            self.idle_rounds = 0
        return best_ks

    def _expected_relative(self, batch: int, drafts: Sequence[tuple[int, float]]) -> float:
        """The forward's expected cost in plain steps, its width the widest draft found
        among `drafts` ((width, chance its drafter finds one); found independently)."""
        expected = below = 0.0
        for width in sorted({1, *(w for w, _ in drafts)}):
            at_most = _none_wider(drafts, width)  # P(the widest found is `width` or less)
            expected += (at_most - below) * self.costs.relative(batch, width)
            below = at_most
        return expected


def _none_wider(drafts: Sequence[tuple[int, float]], width: int) -> float:
    """The chance that no draft wider than `width` is found."""
    return math.prod(1.0 - chance for w, chance in drafts if w > width)


def row_k(rate: float, width: int) -> int:
    """Draft positions worth proposing for a row with this acceptance, in a forward this wide:
    the j-th draft is kept with probability rate**j."""
    k = 0
    while k < width - 1 and rate ** (k + 1) >= DEFAULT_MIN_MARGINAL:
        k += 1
    return k
