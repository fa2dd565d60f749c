"""After a batched forward raised: find the rows that fail alone and keep the others exact.

A forward that raises while its graph is built has already written some layers' new positions.
Each row's cache is taken out of the batch and trimmed back to the positions the row held before
the step (the batch keeps that count per row), then the same inputs are tried for that row alone:
the rows that raise again are failed with the error, the others give back the probe's positions
and form the batch again, so the step can run again without them. This costs a forward per row,
only after a failure; a step that succeeds pays nothing for it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import mlx.core as mx

from engine.core.batch import DecodeBatch
from engine.core.request_state import RequestState

log = logging.getLogger(__name__)


@dataclass
class _Row:
    state: RequestState
    cache: list[Any]
    pending: int
    fresh: bool  # the pending input is a new token not yet handed out
    length: int


def recover_batch(
    batch: DecodeBatch, error: Exception, probes: list[list[int]], *, shared: bool = False
) -> dict[str, str]:
    """Rebuild `batch` without the rows that fail alone on their `probes[i]` inputs; returns
    the failed rows' messages by request id (every row, when none fails alone, unless the
    forward was `shared` with prompt chunks: then those are to blame, and every row stays)."""
    message = f"decoding failed: {error}"
    rows = list(batch.rows)
    try:
        pending = batch.inputs.tolist()
    except Exception:  # noqa: BLE001 - the pending tokens themselves are lost
        log.exception("the batch's pending tokens cannot be read back")
        batch.keep([])
        return {s.request_id: message for s in rows}
    failed: dict[str, str] = {}
    survivors: list[_Row] = []
    for i, state in enumerate(rows):
        cache = _single_row(batch, i)
        if cache is None:
            failed[state.request_id] = message
            continue
        row = _Row(state, cache, pending[i], batch.input_is_sampled[i], batch.lengths[i])
        if _fails_alone(batch.model, row, probes[i]):
            failed[state.request_id] = message
        else:
            survivors.append(row)
    if not failed and not shared:  # it only fails in company: no row can be told apart
        failed = {s.request_id: message for s in rows}
        survivors = []
    batch.keep([])
    for row in survivors:
        batch.add(row.state, row.cache, row.pending)
        batch.lengths[-1] = row.length
        batch.input_is_sampled[-1] = row.fresh
    log.warning("a batched forward failed (%s); %d row(s) failed alone", error, len(failed))
    return failed


def _single_row(batch: DecodeBatch, i: int) -> list[Any] | None:
    """Row i's caches alone, trimmed back to what it held before the step (None: impossible,
    e.g. a wrapped sliding window or recurrent state already overwritten)."""
    try:
        cache = batch.extract(batch.rows[i])
        return cache if trim_to(cache, batch.lengths[i]) else None
    except Exception:  # noqa: BLE001 - that row cannot be saved
        log.exception("could not take row %d out of the batch", i)
        return None


def trim_to(cache: list[Any], length: int) -> bool:
    """Trim every layer back to `length` positions; False when a layer cannot be (recurrent
    state, whose earlier value the failed forward has replaced)."""
    for layer in cache:
        offset = getattr(layer, "offset", None)
        if not isinstance(offset, int):
            return False
        surplus = offset - length
        if surplus < 0:
            return False
        if surplus and not (layer.is_trimmable() and layer.trim(surplus) == surplus):
            return False
    return True


def _fails_alone(model: Any, row: _Row, probe: list[int]) -> bool:
    try:
        logits = model(mx.array([probe], dtype=mx.uint32), cache=row.cache)
        mx.eval(logits)
    except Exception:  # noqa: BLE001 - this is the row
        return True
    return not trim_to(row.cache, row.length)


def failed_inputs(
    batch: DecodeBatch, plan: list[Any], drafts: dict[str, list[int]]
) -> list[list[int]]:
    """The inputs each row had in the failed step: its replayed tokens, its pending token and
    its draft (the probes `recover_batch` tries alone)."""
    try:
        pending = batch.inputs.tolist()
    except Exception:  # noqa: BLE001 - recover_batch reports it
        return [[0] for _ in plan]
    return [
        replay + [t] + drafts.get(r.state.request_id, [])
        for replay, t, r in zip(batch.replay, pending, plan)
    ]
