"""Attention by groups of rows, each over its own rows' keys, not the longest row's.

A batch cache keeps its rows right-aligned: a short chat beside a long one is left-padded to the
long one's length, and attention masks the padding but still computes over it. On the 2-core CPU
three chats of 300 tokens beside one of 2,048 took 150 ms a decode step, as long as four rows of
2,048, where the same rows attending over their own keys took 96 ms (docs/benchmarks.md, the
thirty-first pass). Here a forward's attention runs once per group of neighbouring rows (decode
steps, verify rounds, prompts prefilled side by side; not a GPU's verify rounds over the whole
buffer, whose shapes must stay put), each over the keys from its group's earliest real position
on: `plan` picks the groups (at most DEFAULT_MAX_GROUPS, only where they save enough), the ragged
cache offers the plan with the keys it hands the model (`offer`), and the wrapper of
`mx.fast.scaled_dot_product_attention` splits a call whose keys and values are exactly those
arrays, under a mask of one row per row. Every key a row may see is in its group's window, and
the mask (sliced with it) still hides the rest, so each row attends over the same keys as
before, in a shorter sum of zeros. Offers and plans are swapped whole and matched by identity,
so engines on two threads (tests, benchmarks) never take each other's.

On by default on the CPU, where it was measured; on a GPU (more attention calls: kernel launches
against the padding's reads) only with `TANDEM_ROW_GROUP_ATTENTION=1` until it is measured there;
`=0` turns it off everywhere.
"""

from __future__ import annotations

import math
import os
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mlx.core as mx

from engine.kernels.switch import is_set

ENV = "TANDEM_ROW_GROUP_ATTENTION"
DEFAULT_MAX_GROUPS = 4
DEFAULT_MIN_SAVED = 1024  # key positions (summed over rows) a plan must save
DEFAULT_MIN_SAVED_SHARE = 0.25  # ... and this share of the padded batch's
DEFAULT_GROUP_COST = 256  # key positions an extra group is charged (its calls and slices)


@dataclass(frozen=True)
class Group:
    """Rows `lo` to `hi` (exclusive) of the batch, attending over keys from `start` on."""

    lo: int
    hi: int
    start: int


@dataclass
class _Offer:
    keys: weakref.ref  # weak: an offer no call took keeps no cache alive
    values: weakref.ref
    groups: tuple[Group, ...]


_state: dict[str, Any] = {"enabled": None, "offer": None, "plan": None, "splits": 0}


def enabled() -> bool:
    """Whether forwards split their attention by row groups here (see above)."""
    if _state["enabled"] is None:
        setting = os.environ.get(ENV, "")
        if setting == "0":
            _state["enabled"] = False
        else:
            _state["enabled"] = is_set(ENV) or mx.default_device().type == mx.DeviceType.cpu
    return _state["enabled"]


def set_enabled(on: bool | None) -> None:
    """Turn the split on or off (None: as the environment and device say), for tests and A/B."""
    _state["enabled"] = on
    _state["offer"] = None


def plan(
    starts: list[int],
    length: int,
    *,
    max_groups: int | None = None,
    min_saved: int | None = None,
    min_saved_share: float | None = None,
    group_cost: int | None = None,
) -> tuple[Group, ...] | None:
    """Groups of neighbouring rows (row i's first real key at `starts[i]` of `length` keys) that
    attend over fewest keys, each group past the first charged `group_cost`; None where that
    saves too little against every row attending over all `length` keys. Options left out
    take the DEFAULT_* values as they are when called."""
    if not starts:
        return None
    max_groups = DEFAULT_MAX_GROUPS if max_groups is None else max_groups
    min_saved = DEFAULT_MIN_SAVED if min_saved is None else min_saved
    if min_saved_share is None:
        min_saved_share = DEFAULT_MIN_SAVED_SHARE
    group_cost = DEFAULT_GROUP_COST if group_cost is None else group_cost
    groups, saved = _best_groups(tuple(starts), max_groups, group_cost)
    if saved < min_saved or saved < min_saved_share * len(starts) * length:
        return None
    return groups


def _best_groups(
    starts: tuple[int, ...], max_groups: int, group_cost: int
) -> tuple[tuple[Group, ...], int]:
    """The groups, and the key positions they skip. A group skips its rows times its earliest
    start whatever the length, so the choice is made once per set of starts (every layer of
    every forward until rows join, leave or compact asks the same)."""
    key = (starts, max_groups, group_cost)
    cached = _state["plan"]  # (key, result), swapped whole: engines on two threads never mix
    if cached is not None and cached[0] == key:
        return cached[1]
    rows, spread = len(starts), max(starts) - min(starts)
    if rows * spread <= group_cost:  # no split can pay for itself: one window from the least
        result = ((Group(0, rows, min(starts)),), rows * min(starts))
    else:
        result = _split(starts, max_groups, group_cost)
    _state["plan"] = (key, result)
    return result


def _split(
    starts: tuple[int, ...], max_groups: int, group_cost: int
) -> tuple[tuple[Group, ...], int]:
    rows = len(starts)
    # gain[g][i]: most positions skipped by rows [0, i) in g groups, less the extra groups'
    # charge; cut[g][i]: where the last of them starts
    gain = [[-math.inf] * (rows + 1) for _ in range(max_groups + 1)]
    cut = [[0] * (rows + 1) for _ in range(max_groups + 1)]
    gain[0][0] = float(group_cost)  # the first group is free
    for g in range(1, max_groups + 1):
        for i in range(1, rows + 1):
            first = starts[i - 1]
            for j in range(i - 1, -1, -1):  # the last group is rows [j, i)
                first = min(first, starts[j])
                if gain[g - 1][j] == -math.inf:
                    continue
                value = gain[g - 1][j] + (i - j) * first - group_cost
                if value > gain[g][i]:
                    gain[g][i], cut[g][i] = value, j
    used = max(range(1, max_groups + 1), key=lambda g: (gain[g][rows], -g))
    groups, i = [], rows
    for g in range(used, 0, -1):
        j = cut[g][i]
        groups.append(Group(j, i, min(starts[j:i])))
        i = j
    groups.reverse()
    return tuple(groups), sum((grp.hi - grp.lo) * grp.start for grp in groups)


class PaddingStarts:
    """For a batch cache with `left_padding` [B]: each row's first real position as host ints,
    read from the device once per change of the padding (rows joined or left, holes
    compacted), not every step."""

    def starts(self) -> list[int]:
        if self.__dict__.get("_starts") is None:
            self.__dict__["_starts"] = self.left_padding.tolist()  # type: ignore[attr-defined]
        return self.__dict__["_starts"]

    def __setattr__(self, name: str, value: object) -> None:
        if name == "left_padding":  # read again (once) when next asked
            self.__dict__["_starts"] = None
        super().__setattr__(name, value)


def hand_over(cache: PaddingStarts, keys: mx.array, values: mx.array, length: int) -> None:
    """`cache` hands the model `keys` and `values` of `length` positions: offer its plan for
    them, or withdraw an older offer where there is none."""
    if not enabled():
        return
    starts = cache.starts()
    groups = plan(starts, length) if any(starts) else None
    if groups is not None:  # rows far shorter than others attend over their own keys
        offer(keys, values, groups)
    else:
        withdraw()


def offer(keys: mx.array, values: mx.array, groups: tuple[Group, ...]) -> None:
    """The cache hands the model these keys and values: an attention call over exactly them
    may split by `groups` (the next offer replaces this one)."""
    _state["offer"] = _Offer(weakref.ref(keys), weakref.ref(values), groups)


def withdraw() -> None:
    """No offer stands (a forward without a plan)."""
    _state["offer"] = None


def split_calls() -> int:
    """Attention calls split so far in this process (benchmarks report it: on a GPU a CUDA
    kernel may take a call before the split sees it)."""
    return _state["splits"]


def _taken(k: mx.array, v: mx.array) -> tuple[Group, ...] | None:
    held = _state["offer"]
    if held is None or held.keys() is not k or held.values() is not v:
        return None
    _state["offer"] = None
    return held.groups


def _groups_for(q: mx.array, k: mx.array, v: mx.array, mask: Any) -> tuple[Group, ...] | None:
    """The groups a call over keys `k` and values `v` (their data arrays) splits by: those
    offered for exactly them, under a mask of one row per row whose length is theirs (it
    hides what a group's window leaves out); else None, and the call runs whole."""
    groups = _taken(k, v)
    if (
        groups is None
        or not isinstance(mask, mx.array)
        or mask.shape[0] != q.shape[0]
        or mask.shape[-1] != k.shape[2]
    ):
        return None
    _state["splits"] += 1
    return groups


def make_sdpa(original: Callable[..., mx.array]) -> Callable[..., mx.array]:
    """A drop-in `mx.fast.scaled_dot_product_attention` that splits a call over offered keys by
    their row groups, and calls `original` for everything (and every group)."""

    def scaled_dot_product_attention(q, k, v, *args, scale, mask=None, sinks=None, **kwargs):
        groups = None if args or kwargs else _groups_for(q, k, v, mask)
        if groups is None:
            return original(q, k, v, *args, scale=scale, mask=mask, sinks=sinks, **kwargs)
        parts = [
            original(
                q[g.lo : g.hi],
                k[g.lo : g.hi, :, g.start :],
                v[g.lo : g.hi, :, g.start :],
                scale=scale,
                mask=mask[g.lo : g.hi, ..., g.start :],
                sinks=sinks,
            )
            for g in groups
        ]
        return mx.concatenate(parts, axis=0)

    scaled_dot_product_attention.tandem_row_groups = True  # type: ignore[attr-defined]
    scaled_dot_product_attention.__wrapped__ = original  # type: ignore[attr-defined]
    return scaled_dot_product_attention


def make_quantized_sdpa(original: Callable[..., mx.array]) -> Callable[..., mx.array]:
    """The same for mlx-lm's attention over quantized keys and values (triples of data, scales
    and biases; engine/cache/batch_quantized.py offers their data arrays)."""

    def quantized_scaled_dot_product_attention(queries, q_keys, q_values, scale, mask, **kwargs):
        groups = _groups_for(queries, q_keys[0], q_values[0], mask)
        if groups is None:
            return original(queries, q_keys, q_values, scale, mask, **kwargs)
        parts = [
            original(
                queries[g.lo : g.hi],
                tuple(part[g.lo : g.hi, :, g.start :] for part in q_keys),
                tuple(part[g.lo : g.hi, :, g.start :] for part in q_values),
                scale,
                mask[g.lo : g.hi, ..., g.start :],
                **kwargs,
            )
            for g in groups
        ]
        return mx.concatenate(parts, axis=0)

    quantized_scaled_dot_product_attention.tandem_row_groups = True  # type: ignore[attr-defined]
    quantized_scaled_dot_product_attention.__wrapped__ = original  # type: ignore[attr-defined]
    return quantized_scaled_dot_product_attention


def _wrapped(fn: Any) -> bool:
    while fn is not None:
        if getattr(fn, "tandem_row_groups", False):
            return True
        fn = getattr(fn, "__wrapped__", None)
    return False


def is_installed() -> bool:
    """Whether the wrappers are in place (anywhere in each function's chain of wrappers)."""
    from mlx_lm.models import base

    return _wrapped(mx.fast.scaled_dot_product_attention) and _wrapped(
        base.quantized_scaled_dot_product_attention
    )


def install() -> None:
    """Put the wrappers in place (once; before the CUDA kernels wrap the same function, so that
    their A/B switches find their own wrapper outermost). mlx-lm's attention looks the quantized
    function up in its module at each call, so replacing it there reaches every model."""
    from mlx_lm.models import base

    if not _wrapped(mx.fast.scaled_dot_product_attention):
        mx.fast.scaled_dot_product_attention = make_sdpa(mx.fast.scaled_dot_product_attention)
    if not _wrapped(base.quantized_scaled_dot_product_attention):
        base.quantized_scaled_dot_product_attention = make_quantized_sdpa(
            base.quantized_scaled_dot_product_attention
        )
