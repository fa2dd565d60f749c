"""A reply's RequestStats as stored with its message: a flat summary for display, and the full
stats (per-position acceptance, context use, ...) that the live panel shows after a restart."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from app.formatting import stats_summary
from engine.requests import FinishReason, RequestStats, SpecStats

FULL_KEY = "request"


def encode(stats: RequestStats) -> dict:
    """Plain JSON: `stats_summary` keys plus the whole RequestStats under "request"."""
    return {**stats_summary(stats), FULL_KEY: _plain(dataclasses.asdict(stats))}


def decode(data: dict | None) -> RequestStats | None:
    """The RequestStats kept by `encode`; from a summary alone (schema 1) what it holds."""
    if not data:
        return None
    full = data.get(FULL_KEY)
    if not isinstance(full, dict):
        full = dict(data)
        full["spec"] = {k: data[k] for k in _field_names(SpecStats) if k in data}
    values = {k: full[k] for k in _field_names(RequestStats) if k in full}
    values["spec"] = SpecStats(
        **{k: v for k, v in (full.get("spec") or {}).items() if k in _field_names(SpecStats)}
    )
    reason = values.get("finish_reason")
    values["finish_reason"] = FinishReason(reason) if reason else None
    return RequestStats(**values)


def _field_names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
