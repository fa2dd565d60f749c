"""Recurrent state in the running batch (mlx-lm's ArraysCache: the conv and SSM / gated-delta
state of hybrid and state-space models such as Qwen3.5, Qwen3-Next, LFM2, Mamba 2).

Such state cannot be trimmed: after a forward it holds every position fed. So a verify round
keeps references to the state from before its forward (`RecurrentSnapshot`, no copy: a forward
replaces the arrays instead of writing into them). A row whose draft was not all kept gets its
state recomputed from what the forward fed its layers (`recompute_rows`,
engine/cache/recurrent_capture.py) where the model's layers allow it; otherwise it goes back to
the snapshot and feeds its kept tokens again with the next forward (engine/core/batch.py). Rows
that feed fewer tokens than the forward's width mask the rest (`lengths`), so padding never
enters their state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import ArraysCache

from engine.cache.cache_list import leaves
from engine.cache.recurrent_capture import ForwardCapture


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

    def recompute_rows(
        self, capture: ForwardCapture | None, kept: list[int], rows: list[bool]
    ) -> bool:
        """Put rows[i] == True at the state after the first kept[i] positions the forward fed,
        recomputed from `capture`; False, with nothing changed, when the capture does not
        describe these layers (one conv input and one recurrence call per layer, in order)."""
        if not any(rows):
            return True
        plan = _recompute_plan(self.layers, capture)
        if plan is None:
            return False
        width = plan[0][3].width
        ends = mx.array(kept)
        keep = mx.arange(width)[None, :] < ends[:, None]
        back = mx.array(rows)
        for layer, state_slot, conv_slot, call, conv_input in plan:
            old_state = call.state  # the state from before the forward (the snapshot's)
            mask = keep if call.mask is None else call.mask & keep
            state = call.rerun(old_state, mask)
            current = layer.cache[state_slot]
            layer.cache[state_slot] = mx.where(_rows(back, current.ndim), state, current)
            n_keep = layer.cache[conv_slot].shape[1]
            # the window the layer itself keeps for a row fed `kept` tokens (its `lengths` path)
            positions = (mx.clip(ends, 0, width)[:, None] + mx.arange(n_keep))[..., None]
            conv = mx.take_along_axis(conv_input, positions, axis=1)
            current = layer.cache[conv_slot]
            layer.cache[conv_slot] = mx.where(_rows(back, current.ndim), conv, current)
        return True


def _rows(back: mx.array, ndim: int) -> mx.array:
    return back.reshape((-1,) + (1,) * (ndim - 1))


def _recompute_plan(
    layers: list[tuple[ArraysCache, list[Any]]], capture: ForwardCapture | None
) -> list[tuple[ArraysCache, int, int, Any, mx.array]] | None:
    """Pair each recurrent layer with its captured conv input and recurrence call."""
    if capture is None or not layers:
        return None
    if len(capture.calls) != len(layers) or len(capture.conv_inputs) != len(layers):
        return None
    plan = []
    for (layer, before), call, conv_input in zip(layers, capture.calls, capture.conv_inputs):
        state_slot = next(
            (j for j, old in enumerate(before) if old is not None and old is call.state), None
        )
        others = [j for j in range(len(before)) if j != state_slot]
        if state_slot is None or len(others) != 1 or before[others[0]] is None:
            return None
        conv_old = before[others[0]]
        if conv_old.ndim != 3 or conv_input.ndim != 3 or call.width < 1:
            return None
        batch, n_keep, channels = conv_old.shape
        if conv_input.shape != (batch, n_keep + call.width, channels):
            return None
        plan.append((layer, state_slot, others[0], call, conv_input))
    widths = {p[3].width for p in plan}
    return plan if len(widths) == 1 else None
