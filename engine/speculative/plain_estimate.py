"""What a reply's speed would have been without its own drafts, for the panel's verdict: each
forward the row drafted in, priced by the cost model as it ran and as it would have run had
this row drafted nothing (its neighbours' drafts kept: they widen the forward either way), one
forward per token.

A row's decode rate is its wall time (other rows' prompts, streaming, pauses included); the
estimate swaps only the priced forwards' seconds, so a row that never drafted reads exactly its
own rate. (Before, the panel set the rate against the cheapest plain step measured at the
current batch size: an "off" row read 0.7x "plain" beside two others on the CPU, and auto was
called slower than plain where it was level with an "off" neighbour.)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # step_plan imports the request state, which holds a PlainEstimate
    from engine.core.step_plan import TokenRun
    from engine.speculative.auto import CostModel


class Forward(NamedTuple):
    """A forward a row drafted in: its batch size, its width, the width without the row's
    draft, and the tokens the row got from it."""

    batch: int
    width: int
    others: int
    tokens: int


@dataclass
class PlainEstimate:
    """A row's forwards with a draft of its own, priced when asked with the latest costs (a
    batch size's first forwards run before its plain step is measured)."""

    costs: CostModel | None = None
    forwards: Counter[Forward] = field(default_factory=Counter)

    def add(self, forward: Forward) -> None:
        self.forwards[forward] += 1

    def rate(self, tokens: int, decode_s: float) -> float | None:
        """Tokens per second over `decode_s` with the row's drafting forwards swapped for
        plain ones; None where none of them can be priced yet."""
        if tokens <= 0 or decode_s <= 0:
            return None
        if not self.forwards:  # it never drafted: its rate is the plain rate
            return tokens / decode_s
        ran_s = plain_s = 0.0
        for f, count in self.forwards.items():
            step = self.costs.seconds.get((f.batch, 1)) if self.costs else None
            if not step or not self.costs.measured(f.batch):
                continue  # left out: it counts as it ran
            ran_s += count * step * self.costs.relative(f.batch, f.width)
            plain_s += count * f.tokens * step * self.costs.relative(f.batch, f.others)
        if not ran_s:
            return None
        seconds = decode_s - ran_s + plain_s
        return tokens / seconds if seconds > 0 else None


def note_runs(
    batch: int, runs: dict[str, list[TokenRun]], estimates: dict[str, PlainEstimate]
) -> None:
    """Note one step's runs (`batch` rows; one forward's runs by request id) for the rows in
    `estimates` that drafted in it."""
    own = {rid: _width(rows) for rid, rows in runs.items()}
    if max(own.values(), default=1) <= 1:  # a plain step: nothing to note
        return
    widest = sorted(own.values(), reverse=True)[:2] + [1, 1]
    for rid, estimate in estimates.items():
        mine = own.get(rid, 1)
        if mine <= 1:
            continue
        # the widest draft of the others: the second widest where this row is the widest
        others = widest[1] if mine == widest[0] else widest[0]
        tokens = sum(len(run.tokens) for run in runs[rid])
        estimate.add(Forward(batch, max(mine, others), others, tokens))


def _width(runs: Iterable[TokenRun]) -> int:
    """The forward width a row's runs asked for: its draft and the token after it."""
    return max((len(run.draft) + 1 for run in runs if run.draft), default=1)
