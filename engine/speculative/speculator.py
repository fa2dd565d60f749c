"""Picks, per row and per round, which drafter proposes and how many tokens (k), and validates
speculative settings when a request arrives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.request_state import RequestState
from engine.requests import MAX_DRAFT_TOKENS, SpecMethod, SpeculativeParams
from engine.speculative.auto import CostModel, RowAcceptance, choose_k
from engine.speculative.prompt_lookup import PromptLookupDrafter
from engine.speculative.synthetic import SyntheticDrafter


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
        self.costs = CostModel()

    def validate(self, spec: SpeculativeParams) -> None:
        method = SpecMethod(spec.method)
        if method == SpecMethod.OFF:
            return
        if not 1 <= spec.draft_tokens <= MAX_DRAFT_TOKENS:
            raise ValueError(
                f"draft tokens must be 1 to {MAX_DRAFT_TOKENS}, got {spec.draft_tokens}"
            )
        if not 1 <= spec.ngram_min <= spec.ngram_max:
            raise ValueError(
                f"n-gram sizes need 1 <= min <= max, got {spec.ngram_min}..{spec.ngram_max}"
            )
        if method == SpecMethod.DRAFT_MODEL and not self.draft_available:
            raise ValueError("speculative method 'draft' needs a draft model: load one first")
        if method == SpecMethod.SYNTHETIC and not spec.synthetic_reference:
            raise ValueError("the synthetic drafter needs a reference reply (benchmarks only)")

    def active(self, rows: list[RequestState]) -> bool:
        return any(SpecMethod(r.request.speculative.method) != SpecMethod.OFF for r in rows)

    def plan(self, row: RequestState) -> Plan:
        spec = row.request.speculative
        method = SpecMethod(spec.method)
        room = row.max_new_tokens - len(row.generated) - 1  # drafts past the end are wasted
        k = max(0, min(spec.draft_tokens, room))
        if method == SpecMethod.OFF or k == 0:
            return Plan(None, 0)
        if method == SpecMethod.PROMPT_LOOKUP:
            return Plan(self.lookup, k)
        if method == SpecMethod.DRAFT_MODEL:
            return Plan(self.draft, k)
        if method == SpecMethod.SYNTHETIC:
            return Plan(self.synthetic, k)
        # AUTO: the draft model when one is loaded, else prompt lookup; k from the cost model
        if row.drafter_state is None:
            row.drafter_state = RowAcceptance()
        k = min(k, choose_k(row.drafter_state, self.costs, MAX_DRAFT_TOKENS))
        return Plan(self.draft or self.lookup, k)

    def observe(self, row: RequestState, drafted: list[int], accepted: int) -> None:
        if isinstance(row.drafter_state, RowAcceptance):
            row.drafter_state.update(len(drafted), accepted)
