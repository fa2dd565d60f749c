"""Which drafter proposes for each running row and how many tokens (k), every round: the fixed
methods ask their own drafter for their own k; "auto" rows share one k picked from measured
costs and their recent acceptance (engine/speculative/auto.py), with the row's draft model (or
the model's draft head or MTP layers) when it has one, a strong prompt-lookup match taking
precedence over it, and prompt lookup otherwise. A row with a model drafter drafts by prompt
lookup instead while lookup's drafts yield more for it (kept, and found), and auto rows also
learn from lookup drafts they did not verify (engine/speculative/shadow_lookup.py). Draft
models are drafters named by `draft_drafter_name` (a request names its own); the row carries
the name of its own. Pure Python: it never touches a model."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from engine.core.request_state import RequestState
from engine.requests import DEFAULT_DRAFT_TOKENS, MAX_DRAFT_TOKENS, SpecMethod, SpeculativeParams
from engine.speculative.auto import AutoPolicy, CostModel, RowAcceptance, expected_tokens
from engine.speculative.prompt_lookup import DEFAULT_SEARCH_WINDOW, lookup
from engine.speculative.shadow_lookup import (
    DEFAULT_SHADOW_BUDGET,
    DEFAULT_SHADOW_TOKENS,
    ShadowDraft,
)


@dataclass(frozen=True)
class DraftChoice:
    """One row's draft this round: `k` tokens from the drafter named `drafter` (k=0: none)."""

    drafter: str | None = None
    k: int = 0
    note: str | None = None  # why a row that asked to speculate runs plain
    # "auto" with a model drafter: a strong prompt-lookup match, when there is one, drafts
    # instead (it wins where the reply copies the prompt; the drafter's state waits)
    lookup_first: bool = False


@dataclass
class SpeculationPolicy:
    """Plans each round's drafts; learns each row's acceptance from the rounds' outcomes."""

    auto: AutoPolicy = field(default_factory=AutoPolicy)
    drafters: frozenset[str] = frozenset()  # names of the drafters that can run now
    refusal: str | None = None  # why the model cannot speculate at all, if it cannot
    unavailable: dict[str, str] = field(default_factory=dict)  # drafter name -> why not here
    checks: dict[str, Callable[[SpeculativeParams], None]] = field(default_factory=dict)
    own_draft: str | None = None  # the model's trained draft head, for rows naming no draft model
    _acceptance: dict[str, RowAcceptance] = field(default_factory=dict)
    # every auto row's rounds, decayed: a new row starts from what its neighbours and the rows
    # before it were kept lately, not from a fixed prior (short replies ended before a row
    # that started pessimistic had drafted enough to learn otherwise)
    _pooled: RowAcceptance = field(default_factory=RowAcceptance)
    # prompt lookup's own acceptance for auto rows that draft with a model: a row whose reply
    # copies its prompt drafts by lookup where lookup is kept more often than the model's drafts
    # (on the CPU's rewrite prompts the trained head's mean acceptance length was 1.4-1.6 and
    # lookup's 3-4, and auto, drafting with the head, reached 0.8 of fixed lookup's speed-up)
    _lookup_acceptance: dict[str, RowAcceptance] = field(default_factory=dict)
    _pooled_lookup: RowAcceptance = field(default_factory=RowAcceptance)
    # lookup drafts of auto rows decoding plainly, scored as the row goes on (shadow_lookup.py)
    _shadows: dict[str, ShadowDraft] = field(default_factory=dict)
    _shadow_turn: int = 0  # where the next step's lookups start among the rows
    # fixed methods' rows: how often their drafter finds a draft (prompt lookup often has none,
    # and the forward auto's rows share is then narrower)
    _fixed_found: dict[str, RowAcceptance] = field(default_factory=dict)

    @property
    def costs(self) -> CostModel:
        return self.auto.costs

    def check(self, spec: SpeculativeParams, *, draft: str | None = None) -> None:
        """Refuse (ValueError) a method whose drafter is not there (`draft`: the drafter name
        of the request's draft model)."""
        method = SpecMethod(spec.method)
        if method == SpecMethod.OFF:
            return
        if self.refusal is not None:
            raise ValueError(f"speculative method {method.value!r} refused: {self.refusal}")
        if method == SpecMethod.AUTO:
            return
        if method == SpecMethod.DRAFT_MODEL:
            draft = self.row_draft(spec, draft)
            if draft is None or draft not in self.drafters:
                why = self.unavailable.get(self.own_draft or "")
                raise ValueError(
                    "speculative.method 'draft' needs a draft model: name one in "
                    "speculative.draft_model (or start the engine with one)"
                    + (f"; this model's own draft head is not available: {why}" if why else "")
                )
            name = draft
        else:
            name = method.value
        if name not in self.drafters:
            why = self.unavailable.get(name, "this model has no such drafter")
            raise ValueError(f"speculative method {method.value!r} is not available: {why}")
        check = self.checks.get(name)
        if check is not None:
            check(spec)

    def row_draft(self, spec: SpeculativeParams, draft: str | None) -> str | None:
        """The drafter name a row drafts with as its draft: its draft model's, else (for
        "draft" and "auto") the model's own trained draft head when it is installed."""
        if draft is not None:
            return draft
        own = self.own_draft
        if own in self.drafters and spec.method in (SpecMethod.DRAFT_MODEL, SpecMethod.AUTO):
            return own
        return None

    def speculates(self, rows: list[RequestState]) -> bool:
        return any(_method(r) != SpecMethod.OFF for r in rows)

    def plan(self, rows: list[RequestState]) -> list[DraftChoice]:
        choices = [self._fixed(row) for row in rows]
        auto = [i for i, row in enumerate(rows) if _method(row) == SpecMethod.AUTO]
        if auto:
            self._score_shadows([rows[i] for i in auto])
            forced = [
                (c.k + 1, self._found_by(row.request_id).found_rate)
                for row, c in zip(rows, choices)
                if c.k
            ]
            drafters, counts = zip(*(self._auto_drafter(rows[i]) for i in auto))
            ks = self.auto.choose(
                [a.rate for a in counts],
                len(rows),
                MAX_DRAFT_TOKENS,
                forced,
                found=[a.found_rate for a in counts],
            )
            lookup_name = SpecMethod.PROMPT_LOOKUP.value
            for i, drafter, k in zip(auto, drafters, ks):
                room = min(k, _room(rows[i]))
                first = bool(room) and drafter != lookup_name and lookup_name in self.drafters
                choices[i] = DraftChoice(drafter if room else None, room, lookup_first=first)
            self._draft_shadows([rows[i] for i in auto], [choices[i] for i in auto])
        return choices

    def observe(
        self, request_id: str, drafted: int, accepted: int, *, drafter: str | None = None
    ) -> None:
        """A round's outcome for an auto row (`drafter`: who drafted; prompt lookup's rounds of
        a row that drafts with a model count towards lookup's acceptance)."""
        for counts in self._counts_for(request_id, drafter):
            counts.update(drafted, accepted)

    def missed(self, request_id: str, drafter: str | None) -> None:
        """An auto row's drafter was asked for a draft and had none: the row's next drafts
        are priced by how often one is found (prompt lookup often has no match)."""
        for counts in self._counts_for(request_id, drafter):
            counts.miss()

    def _counts_for(self, request_id: str, drafter: str | None) -> tuple[RowAcceptance, ...]:
        """The counts a round of `drafter` for this row teaches: an auto row's and their
        pool, or a fixed method's row's (how often its drafter finds a draft)."""
        lookup = self._lookup_acceptance.get(request_id)
        if lookup is not None and drafter == SpecMethod.PROMPT_LOOKUP.value:
            return lookup, self._pooled_lookup
        own = self._acceptance.get(request_id)
        return (own, self._pooled) if own is not None else (self._found_by(request_id),)

    def _found_by(self, request_id: str) -> RowAcceptance:
        """A fixed method's row's counts: auto prices the width its drafts force by how often
        they are found."""
        return self._fixed_found.setdefault(request_id, RowAcceptance())

    def forget(self, request_id: str) -> None:
        self._acceptance.pop(request_id, None)
        self._lookup_acceptance.pop(request_id, None)
        self._shadows.pop(request_id, None)
        self._fixed_found.pop(request_id, None)

    def _auto_drafter(self, row: RequestState) -> tuple[str, RowAcceptance]:
        """An auto row's drafter this round and its counts: its model drafter, or prompt
        lookup where lookup's drafts would yield more for this row (kept more often and found
        often enough)."""
        drafter = auto_drafter(row, self.drafters)
        own = self._row_acceptance(row)
        lookup_name = SpecMethod.PROMPT_LOOKUP.value
        if drafter == lookup_name or lookup_name not in self.drafters:
            return drafter, own
        lookup = self._lookup_acceptance.get(row.request_id)
        if lookup is None:
            pooled = self._pooled_lookup
            lookup = RowAcceptance.starting_at(pooled.rate, pooled.found_rate)
            self._lookup_acceptance[row.request_id] = lookup
        # compared by what a round drafting the usual k would yield: lookup's drafts are often
        # kept but often not found, and a round without one gives the row nothing extra
        better = _yield(lookup) > _yield(own)
        return (lookup_name, lookup) if better else (drafter, own)

    def _score_shadows(self, rows: list[RequestState]) -> None:
        """Count the shadow drafts whose outcome the rows' new tokens tell as verified rounds:
        what a row would have had accepted is its acceptance as much as a round's is."""
        for row in rows:
            shadow = self._shadows.get(row.request_id)
            accepted = None if shadow is None else shadow.score(row.generated)
            if shadow is not None and accepted is not None:
                del self._shadows[row.request_id]
                self.observe(
                    row.request_id,
                    len(shadow.tokens),
                    accepted,
                    drafter=SpecMethod.PROMPT_LOOKUP.value,
                )

    def _draft_shadows(self, rows: list[RequestState], choices: list[DraftChoice]) -> None:
        """Draft by prompt lookup, without verifying, for auto rows that decode plainly this
        round (in turn, while the step's DEFAULT_SHADOW_BUDGET of history lasts): for a row that
        drafts by lookup this is its acceptance, for one with a model drafter lookup's. A row
        that verifies drops its own: its round's count tells (a model's round drafts by lookup
        on a strong match)."""
        if SpecMethod.PROMPT_LOOKUP.value not in self.drafters:
            return
        idle = []
        for row, choice in zip(rows, choices):
            if choice.k:
                self._shadows.pop(row.request_id, None)
            elif row.request_id not in self._shadows and _room(row) > 1:
                idle.append(row)
        if not idle:
            return
        start = self._shadow_turn % len(idle)
        budget = DEFAULT_SHADOW_BUDGET
        for row in idle[start:] + idle[:start]:
            if budget <= 0:
                break
            self._shadow_turn += 1
            history = row.history[-DEFAULT_SEARCH_WINDOW:]
            budget -= len(history)
            params = row.request.speculative
            tokens = lookup(
                history,
                min(DEFAULT_SHADOW_TOKENS, _room(row)),
                ngram_min=params.ngram_min,
                ngram_max=params.ngram_max,
                window=DEFAULT_SEARCH_WINDOW,
            )
            if tokens:
                self._shadows[row.request_id] = ShadowDraft(len(row.generated), tuple(tokens))
            else:  # what a round would have found for it: nothing
                self.missed(row.request_id, SpecMethod.PROMPT_LOOKUP.value)

    def _row_acceptance(self, row: RequestState) -> RowAcceptance:
        acceptance = self._acceptance.get(row.request_id)
        if acceptance is None:
            acceptance = RowAcceptance.starting_at(self._pooled.rate, self._pooled.found_rate)
            self._acceptance[row.request_id] = acceptance
        return acceptance

    def _fixed(self, row: RequestState) -> DraftChoice:
        method = _method(row)
        k = min(row.request.speculative.draft_tokens, _room(row))
        if k <= 0 or method in (SpecMethod.OFF, SpecMethod.AUTO):
            return DraftChoice()
        name = row.draft if method == SpecMethod.DRAFT_MODEL else method.value
        if name not in self.drafters:
            what = "draft model" if method == SpecMethod.DRAFT_MODEL else f"{method.value} drafter"
            return DraftChoice(note=f"the {what} was unloaded: decoding without speculation")
        return DraftChoice(name, k)


def auto_drafter(row: RequestState, available: Collection[str]) -> str:
    """What an "auto" row drafts with: its draft model, else the model's own MTP layers, else
    prompt lookup."""
    if row.draft in available:
        return row.draft
    if SpecMethod.MTP.value in available:
        return SpecMethod.MTP.value
    return SpecMethod.PROMPT_LOOKUP.value


def possible_drafters(row: RequestState, available: Collection[str]) -> set[str]:
    """The drafters that may propose for this row (its method's, or auto's choice)."""
    method = _method(row)
    if method == SpecMethod.OFF:
        return set()
    if method == SpecMethod.AUTO:
        name = auto_drafter(row, available)
    elif method == SpecMethod.DRAFT_MODEL:
        name = row.draft
    else:
        name = method.value
    return {name} if name in available else set()


def draft_drafter_name(model_key: str) -> str:
    """The drafter name of a draft model (one per draft model a target's requests use)."""
    return f"{SpecMethod.DRAFT_MODEL.value}:{model_key}"


def _yield(counts: RowAcceptance) -> float:
    return expected_tokens(counts.rate, DEFAULT_DRAFT_TOKENS, counts.found_rate)


def _method(row: RequestState) -> SpecMethod:
    return SpecMethod(row.request.speculative.method)


def _room(row: RequestState) -> int:
    """Drafts past the reply's end are wasted."""
    return max(0, row.max_new_tokens - len(row.generated) - 1)
