"""Picks, per round, which drafter proposes for each row and how many tokens (k), and validates
speculative settings when a request arrives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.request_state import RequestState
from engine.requests import MAX_DRAFT_TOKENS, SpecMethod, SpeculativeParams
from engine.speculative.auto import AutoPolicy, RowAcceptance
from engine.speculative.prompt_lookup import PromptLookupDrafter
from engine.speculative.synthetic import SyntheticDrafter
from engine.validation import check_speculative, check_token_ids


@dataclass
class Plan:
    drafter: Any | None
    k: int


class Speculator:
    def __init__(self, *, vocab_size: int, draft: Any | None = None) -> None:
        self.lookup = PromptLookupDrafter()
        self.synthetic = SyntheticDrafter(vocab_size=vocab_size)
        self.draft = draft  # a DraftModelDrafter when a draft model is loaded
        self.draft_available = draft is not None  # loaded, or waiting for the batch to drain
        self.auto = AutoPolicy()

    @property
    def costs(self):
        return self.auto.costs

    def validate(self, spec: SpeculativeParams) -> None:
        check_speculative(spec)
        method = SpecMethod(spec.method)
        if method == SpecMethod.DRAFT_MODEL and not self.draft_available:
            raise ValueError("speculative.method 'draft' needs a draft model: load one first")
        if method == SpecMethod.SYNTHETIC:
            check_token_ids(
                "speculative.synthetic_reference",
                spec.synthetic_reference,
                vocab_size=self.synthetic.vocab_size,
            )

    def active(self, rows: list[RequestState]) -> bool:
        return any(SpecMethod(r.request.speculative.method) != SpecMethod.OFF for r in rows)

    def plan(self, rows: list[RequestState]) -> list[Plan]:
        plans = [self._fixed_plan(row) for row in rows]
        auto = [i for i, row in enumerate(rows) if _method(row) == SpecMethod.AUTO]
        if auto:
            free_width = 1 + max((p.k for p in plans), default=0)
            for i in auto:
                if rows[i].drafter_state is None:
                    rows[i].drafter_state = RowAcceptance()
            rates = [rows[i].drafter_state.rate for i in auto]
            k = self.auto.choose(rates, len(rows), MAX_DRAFT_TOKENS, free_width)
            drafter = self.draft or self.lookup
            for i in auto:
                plans[i] = Plan(drafter, min(k, _room(rows[i])))
        return plans

    def _fixed_plan(self, row: RequestState) -> Plan:
        method = _method(row)
        k = min(row.request.speculative.draft_tokens, _room(row))
        if k <= 0 or method in (SpecMethod.OFF, SpecMethod.AUTO):
            return Plan(None, 0)
        drafter = {
            SpecMethod.PROMPT_LOOKUP: self.lookup,
            SpecMethod.DRAFT_MODEL: self.draft,
            SpecMethod.SYNTHETIC: self.synthetic,
        }[method]
        return Plan(drafter, k)

    def observe(self, row: RequestState, drafted: list[int], accepted: int) -> None:
        if isinstance(row.drafter_state, RowAcceptance):
            row.drafter_state.update(len(drafted), accepted)


def _method(row: RequestState) -> SpecMethod:
    return SpecMethod(row.request.speculative.method)


def _room(row: RequestState) -> int:
    """Drafts past the reply's end are wasted."""
    return max(0, row.max_new_tokens - len(row.generated) - 1)
