"""The "auto" method: pick k every round from each row's recent acceptance and the measured cost
of verifying k+1 tokens against 1; stop speculating while it loses.

With per-token acceptance a, k drafts yield (1 - a^(k+1)) / (1 - a) tokens per target forward
(the bonus token included). A round over k+1 tokens per row costs cost(B, k+1) / cost(B, 1)
of a plain step at batch size B, measured as the engine runs: the whole round's wall time
(drafting, forward, acceptance, rollback), since that is what a plain step is weighed
against. All rows of a batch share the forward's width: the width chosen is the one that
maximises the auto rows' summed tokens per unit of cost, and within it each row drafts only
the positions it is likely enough to keep (a row that is rarely accepted drafts less or
nothing while its neighbours draft more); plain decoding unless some width beats it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_PRIOR_ACCEPTANCE = 0.6
DEFAULT_DECAY = 0.8  # weight of the past in the acceptance counts
DEFAULT_EMA = 0.3  # for forward timings
DEFAULT_PROBE_EVERY = 32  # plain rounds before trying speculation again
DEFAULT_COST_SLOPE = 0.15  # extra cost per verified token until measured (CPU: 5 tokens 1.6x)
MIN_GAIN = 1.03  # speculate only for a clear win
DEFAULT_MIN_MARGINAL = 0.1  # a draft position kept less often than this is not proposed


@dataclass
class CostModel:
    """Seconds per step (a plain step, or a verify round with its drafting) by (batch size,
    width), as exponential moving averages."""

    seconds: dict[tuple[int, int], float] = field(default_factory=dict)
    # shapes timed once: that first time pays one-off costs (a graph build per new shape on
    # CUDA, 5x a step and more; buffer allocation), and one such sample, averaged in, kept
    # auto off a width it then rarely tried again
    _first_seen: set[tuple[int, int]] = field(default_factory=set)

    def record(self, batch: int, width: int, seconds: float) -> None:
        key = (batch, width)
        if key not in self._first_seen:
            self._first_seen.add(key)
            return
        old = self.seconds.get(key)
        self.seconds[key] = seconds if old is None else old + DEFAULT_EMA * (seconds - old)

    def relative(self, batch: int, width: int) -> float:
        """cost(batch, width) / cost(batch, 1). A width not measured at this batch size is
        read off the measured ones: between two, on the line joining them; past the widest,
        its cost grown by a slope per extra token (a round's fixed cost, large on a GPU, is
        paid at every width), so a wider width is tried and then known; with nothing
        measured, a slope that grows with batch, at most `width` steps."""
        if width <= 1:
            return 1.0
        base = self.seconds.get((batch, 1))
        if not base:
            return min(1.0 + DEFAULT_COST_SLOPE * (width - 1) * batch, float(width))
        known = {1: 1.0}
        for (b, w), seconds in self.seconds.items():
            if b == batch and w > 1:
                known[w] = max(seconds / base, 1.0)
        if width in known:
            return known[width]
        below = max(w for w in known if w < width)
        above = [w for w in known if w > width]
        if above:
            w2 = min(above)
            t = (width - below) / (w2 - below)
            return known[below] + t * (known[w2] - known[below])
        if below == 1:
            return min(1.0 + DEFAULT_COST_SLOPE * (width - 1) * batch, float(width))
        return known[below] * (1.0 + DEFAULT_COST_SLOPE * (width - below))


@dataclass
class RowAcceptance:
    """Per-token acceptance as decayed success / trial counts (a run of a accepted drafts
    followed by a rejection is a + 1 trials)."""

    successes: float = DEFAULT_PRIOR_ACCEPTANCE * 2
    trials: float = 2.0

    @property
    def rate(self) -> float:
        return self.successes / self.trials if self.trials else DEFAULT_PRIOR_ACCEPTANCE

    def update(self, drafted: int, accepted: int) -> None:
        if drafted <= 0:
            return
        trials = accepted + (1 if accepted < drafted else 0)
        self.successes = DEFAULT_DECAY * self.successes + accepted
        self.trials = DEFAULT_DECAY * self.trials + trials


def expected_tokens(rate: float, k: int) -> float:
    if rate >= 0.999:
        return k + 1.0
    return (1.0 - rate ** (k + 1)) / (1.0 - rate)


@dataclass
class AutoPolicy:
    costs: CostModel = field(default_factory=CostModel)
    idle_rounds: int = 0

    def choose(self, rates: list[float], batch: int, k_max: int, free_width: int = 1) -> list[int]:
        """A k for each auto row of a batch; `free_width` is the width other rows force. The
        forward's width is priced for the whole batch; within it each row drafts only the
        positions it is likely enough to keep (a rarely accepted row drafts less, or nothing)."""
        if not rates:
            return []
        plain = len(rates) / self.costs.relative(batch, free_width)
        best_ks, best = [0] * len(rates), plain * MIN_GAIN
        for width in range(2, k_max + 2):
            ks = [row_k(rate, width) for rate in rates]
            used = max(max(ks) + 1, free_width)
            gain = sum(expected_tokens(r, k) for r, k in zip(rates, ks))
            gain /= self.costs.relative(batch, used)
            if gain > best:
                best_ks, best = ks, gain
        if not any(best_ks):
            self.idle_rounds += 1
            if self.idle_rounds >= DEFAULT_PROBE_EVERY:
                self.idle_rounds = 0
                return [1] * len(rates)  # probe: acceptance or costs may have changed
        else:
            self.idle_rounds = 0
        return best_ks


def row_k(rate: float, width: int) -> int:
    """Draft positions worth proposing for a row with this acceptance, in a forward this wide:
    the j-th draft is kept with probability rate**j."""
    k = 0
    while k < width - 1 and rate ** (k + 1) >= DEFAULT_MIN_MARGINAL:
        k += 1
    return k
