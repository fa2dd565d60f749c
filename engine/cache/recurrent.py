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

from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import ArraysCache

from engine.cache.cache_list import leaves
from engine.cache.recurrent_capture import ForwardCapture, Window


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
    _plan: tuple[ForwardCapture, RecomputePlan | None] | None = field(default=None, repr=False)

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
                if old is not None and layer.cache[j] is not None:
                    _put_rows(layer, j, back, old)

    def recompute_rows(
        self, capture: ForwardCapture | None, kept: list[int], rows: list[bool]
    ) -> bool:
        """Put rows[i] == True at the state after the first kept[i] positions the forward fed,
        recomputed from `capture`; False, with nothing changed, when the capture does not
        describe these layers (per layer, in order: at most one recurrence call, whose state
        argument is one of the layer's arrays, and one conv input for each other array)."""
        if not any(rows):
            return True
        plan = self.plan(capture)
        if plan is None:
            return False
        back = mx.array(rows)
        for (layer, *_), arrays in zip(plan.layers, plan.recomputed(kept)):
            for slot, value in arrays.items():
                _put_rows(layer, slot, back, value)
        return True

    def plan(self, capture: ForwardCapture | None) -> RecomputePlan | None:
        """`RecomputePlan.pair` for this snapshot's layers, made once per capture (the
        rollback and a leaving row's prompt-cache entry both ask)."""
        if capture is None:
            return None
        if self._plan is None or self._plan[0] is not capture:
            self._plan = (capture, RecomputePlan.pair(self.layers, capture))
        return self._plan[1]

    def row_arrays_at(
        self, capture: ForwardCapture | None, row: int, kept: int
    ) -> list[dict[int, mx.array]] | None:
        """Row `row`'s arrays ([1, ...]) in each recurrent layer after the first `kept`
        positions the forward fed it, recomputed from `capture`; None when it cannot."""
        plan = self.plan(capture)
        if plan is None:
            return None
        batch = [kept if b == row else 0 for b in range(plan.rows)]
        return [
            {slot: value[row : row + 1] for slot, value in arrays.items()}
            for arrays in plan.recomputed(batch)
        ]


def _put_rows(layer: ArraysCache, slot: int, back: mx.array, value: mx.array) -> None:
    """Rows where `back` is True take `value` in this array of the layer; the rest keep theirs."""
    current = layer.cache[slot]
    mask = back.reshape((-1,) + (1,) * (current.ndim - 1))
    layer.cache[slot] = mx.where(mask, value, current)


# (layer, its recurrence's slot, the call, [(slot, conv input, its time axis)])
LayerPlan = tuple[ArraysCache, int | None, Any, list[tuple[int, mx.array, int]]]
_checked: dict[tuple, bool] = {}  # layer layouts whose pairing was checked once, and the answer


@dataclass
class RecomputePlan:
    """Each recurrent layer with its recurrence call (None: a conv-only layer such as LFM2's)
    and its other arrays paired with the conv inputs the layer fed, from one forward."""

    layers: list[LayerPlan]
    width: int  # positions each row was fed
    rows: int

    @classmethod
    def pair(
        cls, layers: list[tuple[ArraysCache, list[Any]]], capture: ForwardCapture | None
    ) -> RecomputePlan | None:
        """The plan, or None when the capture does not describe these layers. A layer's call
        is the next recorded one when its state argument is one of the layer's arrays."""
        if capture is None or not layers:
            return None
        inputs, calls = iter(capture.conv_inputs), list(capture.calls)
        plan: list[LayerPlan] = []
        widths, rows = set(), set()
        for layer, before in layers:
            call, state_slot = None, None
            if calls:
                state = calls[0].state
                state_slot = next(
                    (j for j, old in enumerate(before) if old is not None and old is state), None
                )
                if state_slot is not None:
                    call = calls.pop(0)
                    widths.add(call.width)
                    rows.add(before[state_slot].shape[0])
            convs = []
            for slot in (j for j in range(len(before)) if j != state_slot):
                old, entry = before[slot], next(inputs, None)
                conv_input, axis = (
                    (entry.values, entry.axis) if isinstance(entry, Window) else (entry, 1)
                )
                if old is None or conv_input is None or old.ndim < 3 or conv_input.ndim != old.ndim:
                    return None
                other = [d for d in range(old.ndim) if d != axis]
                if [conv_input.shape[d] for d in other] != [old.shape[d] for d in other]:
                    return None
                widths.add(conv_input.shape[axis] - old.shape[axis])
                rows.add(old.shape[0])
                convs.append((slot, conv_input, axis))
            plan.append((layer, state_slot, call, convs))
        if calls or next(inputs, None) is not None or len(widths) != 1 or len(rows) != 1:
            return None
        width = widths.pop()
        if width < 1 or not _pairing_holds(layers, plan):
            return None
        return cls(plan, width, rows.pop())

    def recomputed(self, kept: list[int]) -> list[dict[int, mx.array]]:
        """Every row's arrays after its first kept[i] fed positions, per layer."""
        ends = mx.array(kept)
        keep = mx.arange(self.width)[None, :] < ends[:, None]
        out = []
        for _, state_slot, call, convs in self.layers:
            arrays = {}
            if call is not None:  # call.state: the array from before the forward
                mask = keep if call.mask is None else call.mask & keep
                arrays[state_slot] = call.rerun(call.state, mask, ends)
            for slot, conv_input, axis in convs:
                n_keep = conv_input.shape[axis] - self.width
                # the window the layer itself keeps for a row fed `kept` tokens (`lengths`)
                positions = mx.clip(ends, 0, self.width)[:, None] + mx.arange(n_keep)
                shape = [positions.shape[0]] + [1] * (conv_input.ndim - 1)
                shape[axis] = n_keep
                arrays[slot] = mx.take_along_axis(conv_input, positions.reshape(shape), axis=axis)
            out.append(arrays)
        return out


def _pairing_holds(layers: list[tuple[ArraysCache, list[Any]]], plan: list[LayerPlan]) -> bool:
    """Once per layout: each paired conv input starts with the array it was paired with (a conv
    input is that array followed by the new inputs), so a model whose convs run in another
    order than its arrays is refused, never given the wrong state."""
    key = tuple(
        (len(before), state_slot, tuple((s, before[s].shape[1:], a) for s, _, a in convs))
        for (_, before), (_, state_slot, _, convs) in zip(layers, plan)
    )
    if key not in _checked:
        checks = [
            mx.array_equal(
                conv_input[(slice(None),) * axis + (slice(0, before[slot].shape[axis]),)],
                before[slot],
            )
            for (_, before), (_, _, _, convs) in zip(layers, plan)
            for slot, conv_input, axis in convs
        ]
        _checked[key] = bool(mx.all(mx.stack(checks)).item()) if checks else True
    return _checked[key]
