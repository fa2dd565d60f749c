"""The engine fields of GUIDE.md's issue 9/10 contract that the engine on this branch may lack.

The app reads those fields directly; values enter the app through `with_contract_fields`, which
gives an object the contract's defaults for fields its engine does not set yet. Once main's
engine has them, this module and its calls go.
"""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")

DEFAULT_RECENT_WINDOW_S = 60.0

_DEFAULTS: dict[str, dict[str, object]] = {
    "RequestStats": {
        "context_tokens": 0,
        "plain_tokens_per_s": None,
        "recent_acceptance": None,
        "speculation_note": None,
    },
    "EngineStats": {
        "spec_recent": None,
        "recent_window_s": DEFAULT_RECENT_WINDOW_S,
        "uptime_s": 0.0,
    },
    "EngineErrorEvent": {"fatal": False},
}


def with_contract_fields(value: T) -> T:
    """`value` with the contract's default for every field it lacks (set in place)."""
    for name, default in _DEFAULTS.get(type(value).__name__, {}).items():
        if not hasattr(value, name):
            setattr(value, name, default)
    return value
