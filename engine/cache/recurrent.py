"""Recurrent state in the running batch (mlx-lm's ArraysCache: the conv and SSM / gated-delta
state of hybrid and state-space models such as Qwen3.5, Qwen3-Next, LFM2, Mamba 2).

Such state cannot be trimmed: after a forward it holds every position fed. So a verify round
keeps references to the state from before its forward (`RecurrentSnapshot`, no copy: a forward
replaces the arrays instead of writing into them), and rows whose draft was not all kept go back
to it; their kept tokens are fed again with the next forward, which on a GPU costs about nothing
(engine/core/batch.py). Rows that feed fewer tokens than the forward's width mask the rest
(`lengths`), so padding never enters their state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import ArraysCache

from engine.cache.cache_list import leaves


def is_recurrent(layer: Any) -> bool:
    return isinstance(layer, ArraysCache)


def has_recurrent(layers: list[Any] | None) -> bool:
    return any(is_recurrent(c) for c in leaves(layers))


def set_lengths(layers: list[Any], lengths: list[int] | None) -> None:
    """Before a forward over [B, width]: row i feeds only its first lengths[i] tokens to the
    recurrent layers (None: every row feeds the whole width)."""
    for layer in leaves(layers):
        if is_recurrent(layer):
            layer.lengths = mx.array(lengths) if lengths is not None else None


@dataclass
class RecurrentSnapshot:
    """The recurrent layers' state arrays as they were before a forward."""

    layers: list[tuple[ArraysCache, list[Any]]]

    @classmethod
    def take(cls, layers: list[Any]) -> RecurrentSnapshot:
        return cls([(c, list(c.cache)) for c in leaves(layers) if is_recurrent(c)])

    def restore_rows(self, rows: list[bool]) -> None:
        """Put rows[i] == True back to the state from before the forward."""
        if not any(rows):
            return
        back = mx.array(rows)
        for layer, before in self.layers:
            for j, old in enumerate(before):
                new = layer.cache[j]
                if old is None or new is None:
                    continue
                mask = back.reshape((-1,) + (1,) * (new.ndim - 1))
                layer.cache[j] = mx.where(mask, old, new)
