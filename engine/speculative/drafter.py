"""The one interface every drafter implements (prompt lookup, draft model, synthetic, and heads
that read the target's hidden states): propose tokens for a set of rows, then learn from what
the verify forward kept.

Drafters run on the engine thread. A drafter that keeps model state (a KV cache of its own) keeps
it per request id and catches up from the tokens it is shown, so the scheduler and the running
batch know nothing about it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from engine.requests import SpeculativeParams


@dataclass(frozen=True)
class DraftRow:
    """One row as a drafter sees it: every token so far, ending with the pending input (the
    next token the target will read), and how many tokens to propose."""

    request_id: str
    prompt: Sequence[int]
    generated: Sequence[int]  # the reply so far; its last token is the pending input if any
    k: int
    params: SpeculativeParams
    # For drafters with `wants_hidden_states` (/work/notes/HIDDEN_API.md): the target's final
    # hidden states [n, d] at the row's positions not handed over before, oldest first, the
    # last one the position just before the pending token (None: no new position, or the model
    # gives none); `hidden_start` is the position (index into prompt + reply) of hidden[0].
    hidden: Any = None
    hidden_start: int = 0

    def history(self, last: int | None = None) -> list[int]:
        """The row's tokens (prompt then reply), or only the `last` ones."""
        if last is not None and last <= len(self.generated):
            return list(self.generated[len(self.generated) - last :])
        tokens = list(self.prompt) + list(self.generated)
        return tokens if last is None else tokens[-last:]

    def __len__(self) -> int:
        return len(self.prompt) + len(self.generated)


@dataclass
class VerifyFeedback:
    """What one verify forward kept of one row's draft."""

    request_id: str
    draft: list[int]
    accepted: int  # the first `accepted` draft tokens were kept
    tokens: list[int]  # what the target produced at positions 0..accepted (the last is its own)
    hidden: Any = None  # unused: hidden states reach a drafter through DraftRow.hidden


class Drafter:
    """Base of every drafter: `propose` for a set of rows; the other hooks are optional."""

    name: ClassVar[str] = ""
    kind: ClassVar[str] = ""  # SpecStats.rounds_by_drafter's key: the method it serves
    wants_hidden_states: ClassVar[bool] = False  # DraftRow.hidden is filled for it
    # it drafts from the tokens it is shown alone (no state of its own), so it may be shown a
    # guessed history while the last round is on the device (engine/core/lookahead.py)
    drafts_ahead: ClassVar[bool] = False

    def propose(self, rows: list[DraftRow]) -> list[list[int]]:
        """Up to rows[i].k tokens that might follow row i's history."""
        raise NotImplementedError

    def learn(self, feedback: list[VerifyFeedback]) -> None:
        """Called after each verify forward with the rows this drafter proposed for."""

    def forget(self, request_ids: Iterable[str]) -> None:
        """These requests left the batch: drop what is kept for them."""

    def reset(self) -> None:
        """Drop what is kept for every request (the engine lost its batch)."""

    def pace(self, share_s: float | None) -> None:
        """Before each step: the seconds its catching up on new rows' histories may add while
        other rows wait (None: nobody waits; 0: the least it can, the step's prompt chunks
        took the share). A drafter without a model of its own has nothing to catch up."""

    def catch_up_s(self) -> float:
        """Seconds this step's proposals spent catching up on new rows' histories (since
        `pace`): prompt work, kept out of the step's decode time."""
        return 0.0

    def check(self, params: SpeculativeParams) -> None:
        """Raise ValueError when a request with these settings cannot use this drafter."""

    def cache_bytes(self) -> int:
        """Bytes of MLX memory it keeps for its rows (a draft model's KV caches)."""
        return 0


def proposes_for_itself(drafter: Drafter) -> bool:
    """Whether `learn` does anything (the executor skips building feedback otherwise)."""
    return type(drafter).learn is not Drafter.learn
