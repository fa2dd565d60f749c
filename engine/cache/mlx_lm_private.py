"""Every use of mlx-lm's private attributes and functions, in one place.

mlx-lm (0.32.2) keeps some state its batch caches need only as private attributes (the write
index `_idx`, the rotating cache's `_offset` and `_temporal_order`) and resolves model classes
with a private `_get_classes`. Tandem relies on what they mean; tests/engine/test_mlx_lm_private.py
checks each of these meanings against the installed mlx-lm, so an upgrade that changes one fails
there, loudly, instead of somewhere deep in a batch.
"""

from __future__ import annotations

from typing import Any

from mlx_lm.models.cache import _BaseCache

BaseCache = _BaseCache  # the base of mlx-lm's caches (is_trimmable, state, meta_state, ...)


def write_index(cache: Any) -> int:
    """Positions written into a batch cache's buffer (left padding included): `_idx`."""
    return cache._idx


def set_write_index(cache: Any, value: int) -> None:
    cache._idx = value


def right_padding(cache: Any) -> Any:
    """A BatchKVCache's right padding between `prepare` and `finalize` (None otherwise)."""
    return getattr(cache, "_right_padding", None)


def rotating_offset(cache: Any) -> int:
    """A BatchRotatingKVCache's count of positions ever written (`_offset`)."""
    return cache._offset


def set_rotating_offset(cache: Any, value: int) -> None:
    cache._offset = value


def rotating_temporal_order(cache: Any) -> None:
    """Put a BatchRotatingKVCache's buffer in temporal order (what its multi-token update does
    first): afterwards it is not `rotated` and `_idx` is the buffer's length."""
    cache._temporal_order()


def rotating_in_temporal_order(cache: Any, x: Any) -> Any:
    """A single-row RotatingKVCache's keys or values `x` in temporal order."""
    return cache._temporal_order(x)


def model_classes(config: dict[str, Any]) -> tuple[type, type]:
    """mlx-lm's (Model, ModelArgs) for a config, with its own model-type remappings."""
    from mlx_lm.utils import _get_classes

    return _get_classes(config)
