"""Each speculating row's draft for a verify round, and the drafter that made it."""

from __future__ import annotations

import logging

from engine.core.drafter_inputs import DrafterInputs
from engine.core.step_plan import DecodeRow, StepOutput
from engine.requests import SpecMethod
from engine.speculative.drafter import Drafter, DraftRow
from engine.speculative.prompt_lookup import DEFAULT_SEARCH_WINDOW, strong_match

log = logging.getLogger(__name__)


def propose(
    drafters: dict[str, Drafter],
    inputs: DrafterInputs,
    plan: list[DecodeRow],
    histories: list[list[int]],
    out: StepOutput,
    *,
    vocab_size: int | None = None,
) -> tuple[list[list[int]], list[str | None]]:
    """Each row's draft and the drafter that made it. A row marked `lookup_first` drafts a
    strong prompt-lookup match when it has one (its own drafter's inputs wait for the next
    round it drafts); then each drafter proposes for its rows at once; when that raises,
    row by row, and a row that fails alone fails. A draft ends before a token the target
    cannot read (an id outside its `vocab_size`: the embedding would read past its table).
    Rows whose drafter had nothing go in `out.missed` (auto learns how often one is found)."""
    drafts: list[list[int]] = [[] for _ in plan]
    used: list[str | None] = [row.drafter for row in plan]
    groups: dict[str, list[int]] = {}
    for i, row in enumerate(plan):
        if not row.k or row.drafter is None or row.state.request_id in out.failed:
            continue
        if row.lookup_first:
            params = row.state.request.speculative
            match = strong_match(
                histories[i], row.k, ngram_max=params.ngram_max, window=DEFAULT_SEARCH_WINDOW
            )
            if match:
                drafts[i], used[i] = match, SpecMethod.PROMPT_LOOKUP.value
                continue
        groups.setdefault(row.drafter, []).append(i)
    for name, indices in groups.items():
        drafter = drafters[name]
        hidden = drafter.wants_hidden_states
        rows = [_draft_row(inputs, plan[i], histories[i], hidden) for i in indices]
        try:
            proposals = drafter.propose(rows)
        except Exception:  # noqa: BLE001 - find the row
            log.warning("drafter %s failed; trying its rows one by one", name, exc_info=True)
            proposals = []
            for row in rows:
                try:
                    proposals.append(drafter.propose([row])[0])
                except Exception as exc:  # noqa: BLE001 - this row fails alone
                    out.fail(row.request_id, f"drafting failed: {exc}")
                    proposals.append([])
        for i, proposal in zip(indices, proposals):
            drafts[i] = _readable([int(t) for t in proposal[: plan[i].k]], vocab_size, name)
    for row, draft in zip(plan, drafts):
        rid = row.state.request_id
        if row.k and row.drafter is not None and not draft and rid not in out.failed:
            out.missed[rid] = row.drafter
    return drafts, used


def _readable(draft: list[int], vocab_size: int | None, drafter: str) -> list[int]:
    """The draft up to its first token outside the target's vocabulary."""
    if vocab_size is None:
        return draft
    for j, token in enumerate(draft):
        if not 0 <= token < vocab_size:
            if drafter not in _WARNED:
                _WARNED.add(drafter)
                log.warning("drafter %s proposed token %d outside the vocabulary", drafter, token)
            return draft[:j]
    return draft


_WARNED: set[str] = set()  # drafters already reported for out-of-vocabulary tokens


def _draft_row(inputs: DrafterInputs, row: DecodeRow, history: list[int], hidden: bool) -> DraftRow:
    state = row.state
    states, start = inputs.take(state.request_id) if hidden else (None, 0)
    return DraftRow(
        request_id=state.request_id,
        prompt=state.prompt,
        generated=history[len(state.prompt) :],
        k=row.k,
        params=state.request.speculative,
        hidden=states,
        hidden_start=start,
    )
