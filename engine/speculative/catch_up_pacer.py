"""How many tokens a draft model may catch up on in one round while other rows wait.

A row that joins with a draft model has its history (the prompt) processed by the draft model
before it drafts, in the verify rounds of the running batch: every row of that round waits for
it. In whole prefill chunks (512 tokens on a CPU, 2,048 on a GPU) a long prompt's catch-up made
each round a stall, as a long prompt's own chunks did before the prefill pacer
(engine/core/prefill_pacer.py). The scheduler gives each step the seconds its prompt work may add
beside decoding rows; this sizes the round's catch-up to them from what the last round's
catch-up took, so the draft's cost per token is measured, not assumed; a round far dearer than
the latest rounds of its size is priced at their median (engine/core/size_costs.py), or one
stall halved the budget into a size never built, itself a stall on CUDA.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.core.size_costs import SizeCosts

DEFAULT_FIRST_CATCH_UP = 64  # tokens, before a round's catch-up beside waiting rows was timed
DEFAULT_MIN_CATCH_UP = 16  # below this a long history would barely move
MAX_RESIZE = 2.0  # at most this factor per round: one noisy round moves the budget little


@dataclass
class CatchUpPacer:
    """Each round's catch-up budget in tokens, resized from the seconds the last one took."""

    max_chunk: int
    min_chunk: int = DEFAULT_MIN_CATCH_UP
    chunk: int = DEFAULT_FIRST_CATCH_UP  # the budget while other rows wait
    pow2: bool = False  # budgets are powers of two (on CUDA each new forward length builds graphs)
    # this round's share: seconds the catch-up may add while other rows wait (None: nobody
    # waits, whole chunks; 0: the least chunk, the step's prompt work took the share)
    share_s: float | None = None
    spent_s: float = 0.0  # seconds this step's catch-up took (Drafter.catch_up_s)
    costs: SizeCosts = field(default_factory=SizeCosts)  # the latest rounds, by size

    def begin_step(self, share_s: float | None) -> None:
        """A new step, with its share (Drafter.pace)."""
        self.share_s, self.spent_s = share_s, 0.0

    def took(self, tokens: int, seconds: float) -> None:
        """A round's catch-up fed `tokens` in `seconds`: counted for the step, and the budget
        resized from it."""
        if tokens > 0:
            self.spent_s += seconds
            self.observe(tokens, seconds)

    def budget(self) -> int:
        """Tokens this round's catch-up may feed, over all the rows catching up."""
        if self.share_s is None:
            return self.max_chunk
        tokens = max(self.min_chunk, min(self.max_chunk, self.chunk))
        return 1 << (tokens.bit_length() - 1) if self.pow2 else tokens

    def observe(self, tokens: int, seconds: float) -> None:
        """What this round's catch-up fed, and the seconds it took."""
        if tokens <= 0 or seconds <= 0:
            return
        self.costs.remember(tokens, seconds)
        if self.share_s is None or self.share_s <= 0:
            return
        target = tokens * self.share_s / self.costs.usual(tokens, seconds)
        target = min(max(target, self.chunk / MAX_RESIZE), self.chunk * MAX_RESIZE)
        self.chunk = max(self.min_chunk, min(self.max_chunk, round(target)))
