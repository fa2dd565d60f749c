"""What the executor gives drafters besides the rows' tokens: the target's hidden states for
drafters that read them (kept per row in HiddenRows until the row's next proposal), and a
drafter's own per-row caches going into and coming out of the prompt cache (the MTP layer's).
"""

from __future__ import annotations

from typing import Any

from engine.core.hidden_rows import HiddenRows
from engine.core.request_state import RequestState
from engine.core.verify_forward import Verify
from engine.speculative.drafter import Drafter
from engine.speculative.policy import possible_drafters


class DrafterInputs:
    """Hidden states waiting per row, and drafter caches for the prompt cache."""

    def __init__(self, drafters: dict[str, Drafter]) -> None:
        self.drafters = drafters  # the executor's own dict (drafters come and go)
        self.hidden = HiddenRows()

    def wants_hidden(self, state: RequestState) -> bool:
        """Whether a drafter that may propose for this row reads hidden states."""
        names = possible_drafters(state, self.drafters.keys())
        return any(self.drafters[name].wants_hidden_states for name in names)

    def keep_verified(
        self, rows: list[RequestState], verify: Verify, kept: list[int], targets: list[Any]
    ) -> None:
        """Each row's replayed tokens, pending input and accepted draft: their hidden states
        wait for the row's drafter (rejected positions never do)."""
        if verify.hidden is None:
            return
        for i, state in enumerate(rows):
            if targets[i] is None or not self.wants_hidden(state):
                continue
            replayed = len(verify.x[i]) - 1 - len(verify.drafts[i])
            n = replayed + kept[i]
            self.hidden.add(state.request_id, verify.starts[i], verify.hidden[i, :n])

    def keep_step(self, rows: list[RequestState], hidden: Any, starts: list[int]) -> None:
        """A plain step's hidden states ([B, 1, d] at `starts`)."""
        for i, state in enumerate(rows):
            if self.wants_hidden(state):
                self.hidden.add(state.request_id, starts[i], hidden[i])

    def take(self, request_id: str) -> tuple[Any, int]:
        return self.hidden.take(request_id)

    # -- a drafter's own per-row caches in the prompt cache --------------------------------------

    def _cache_drafter(self, state: RequestState) -> Any:
        for name in possible_drafters(state, self.drafters.keys()):
            drafter = self.drafters[name]
            if hasattr(drafter, "export_row"):
                return drafter
        return None

    def export(self, state: RequestState, held: int) -> list[Any] | None:
        """The leaving row's drafter cache, holding the target's cached positions (or one
        fewer when the token after them is not known yet), or None."""
        drafter = self._cache_drafter(state)
        if drafter is None:
            return None
        hidden, start = self.hidden.take(state.request_id)
        # the pair at the last cached position needs the token after it: the pending input
        tokens = state.prompt + state.generated
        if state.eos_token is not None:
            tokens.append(state.eos_token)
        return drafter.export_row(state.request_id, tokens, held, hidden, start)

    def adopt(self, state: RequestState, draft: list[Any], positions: int) -> None:
        """A prompt-cache hit brought the row's drafter cache back."""
        drafter = self._cache_drafter(state)
        if drafter is not None and len(draft) == 1:
            drafter.adopt_row(state.request_id, draft[0], positions)
