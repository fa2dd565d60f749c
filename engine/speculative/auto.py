"""The "auto" method: choose each row's k every round from that row's recent acceptance and the
measured cost of verifying k+1 tokens against 1; stop speculating for a row while it loses.

With per-token acceptance a, k drafts yield (1 - a^(k+1)) / (1 - a) tokens per target forward
(the bonus token included); a forward over k+1 tokens costs cost(k+1) / cost(1) of a plain step.
The row speculates with the k that maximises the ratio, or not at all when no k beats 1.0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_PRIOR_ACCEPTANCE = 0.5
DEFAULT_EMA = 0.3
DEFAULT_PROBE_EVERY = 16  # rounds without speculation before trying k=1 again
DEFAULT_COST_SLOPE = 0.15  # assumed cost per extra verified token until measured (CPU: 5 -> 1.6x)
MIN_GAIN = 1.02


@dataclass
class CostModel:
    """Seconds per target forward, by width (tokens per row), as an exponential moving average."""

    seconds: dict[int, float] = field(default_factory=dict)

    def record(self, width: int, seconds: float) -> None:
        old = self.seconds.get(width)
        self.seconds[width] = seconds if old is None else old + DEFAULT_EMA * (seconds - old)

    def relative(self, width: int) -> float:
        base = self.seconds.get(1)
        cost = self.seconds.get(width)
        if base and cost:
            return max(cost / base, 1.0)
        return 1.0 + DEFAULT_COST_SLOPE * (width - 1)


@dataclass
class RowAcceptance:
    rate: float = DEFAULT_PRIOR_ACCEPTANCE
    idle_rounds: int = 0

    def update(self, drafted: int, accepted: int) -> None:
        if drafted <= 0:
            return
        # per-token acceptance consistent with a geometric run of `accepted` matches
        observed = accepted / drafted if accepted < drafted else 1.0
        self.rate += DEFAULT_EMA * (observed - self.rate)


def expected_tokens(rate: float, k: int) -> float:
    if rate >= 0.999:
        return k + 1.0
    return (1.0 - rate ** (k + 1)) / (1.0 - rate)


def choose_k(acceptance: RowAcceptance, costs: CostModel, k_max: int) -> int:
    best_k, best_gain = 0, 1.0
    for k in range(1, k_max + 1):
        gain = expected_tokens(acceptance.rate, k) / costs.relative(k + 1)
        if gain > best_gain * MIN_GAIN if best_k == 0 else gain > best_gain:
            best_k, best_gain = k, gain
    if best_k == 0:
        acceptance.idle_rounds += 1
        if acceptance.idle_rounds >= DEFAULT_PROBE_EVERY:
            acceptance.idle_rounds = 0
            return 1  # probe: acceptance may have changed
    else:
        acceptance.idle_rounds = 0
    return best_k
