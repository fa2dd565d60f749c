"""Which loaded model steps next on the one MLX thread: the one whose rows are owed the most
tokens, so that a busy model (many rows, long prompts) never starves a quiet one.

Each model counts the tokens it has served per row: a step that gives every row one token adds
1, a verify round the mean tokens per row it kept, and any step at least 1 (a step of prompt
processing costs a turn too: prompts are chunked, so a turn is short). The model with the
lowest count steps next. A model that becomes busy starts level with the least-served busy
model, so it cannot bank turns while idle.

Counts, not seconds: with pipelined decoding a step's wall time includes the other model's
forward still in flight, so per-model times cannot be measured; tokens can.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

MIN_TURN_COST = 1.0


@dataclass
class FairShare:
    """Tokens served per row, by model key; picks the model owed the most."""

    served: dict[str, float] = field(default_factory=dict)
    _busy: set[str] = field(default_factory=set)
    _last_turn: dict[str, int] = field(default_factory=dict)
    _turns: int = 0

    def pick(self, busy: Iterable[str]) -> str | None:
        """The busy model to step now (None when none is busy)."""
        busy = list(busy)
        if not busy:
            self._busy = set()
            return None
        stayed = [k for k in busy if k in self._busy]
        level = min((self.served[k] for k in stayed), default=None)
        for key in busy:
            if key not in self._busy:
                start = self.served.get(key, 0.0)
                self.served[key] = start if level is None else max(start, level)
        self._busy = set(busy)
        return min(busy, key=lambda k: (self.served[k], self._last_turn.get(k, -1)))

    def charge(self, key: str, tokens_per_row: float) -> None:
        """`key` stepped and gave each of its rows this many tokens on average."""
        self._turns += 1
        self._last_turn[key] = self._turns
        self.served[key] = self.served.get(key, 0.0) + max(MIN_TURN_COST, tokens_per_row)
        low = min(self.served.values())
        if low > 1e9:  # keep the counts small; only their differences matter
            self.served = {k: v - low for k, v in self.served.items()}

    def forget(self, key: str) -> None:
        self.served.pop(key, None)
        self._last_turn.pop(key, None)
        self._busy.discard(key)
