"""What a verify forward fed the recurrent layers, kept so that rows which keep only part of their
draft get their state recomputed from it instead of feeding their kept tokens again.

Gated-delta layers (Qwen3.5 / Qwen3.6, Qwen3-Next and the rest that call mlx-lm's
`gated_delta_update`), Mamba 2 layers (`ssm_update`: Mamba 2, Nemotron-H, Granite 4 hybrids,
Falcon-H1, ...) and Mamba 1 blocks (`_process_sequence`: Mamba, Falcon-Mamba, Jamba) hold the
convolutions' last inputs and the recurrence's state; LFM2's short convs hold only the former.
During a captured forward every `nn.Conv1d` input and every recurrence call is recorded;
afterwards (engine/cache/recurrent.py, `RecomputePlan`) a short row's convolution state is the
window of its captured input that ends at its last kept position (the gather the layer itself
does for a row with `lengths`), and its recurrence state is the same function run again from the
state before the forward over the kept positions only (a mask). One recurrence call per layer
over at most k+1 positions replaces a second pass of every kept token through the whole model.
Layers that ignore `lengths` (Mamba 1, Jamba, Nemotron-H, OLMo hybrid) take a padded row's
padding into its state; recomputing every padded row undoes that, which is what lets such models
speculate (engine/core/batch_check.py, `recompute_undoes_padding`). Models whose layers do not
fit this shape keep the replay, or are refused speculation where padding would enter their state.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
import mlx.nn as nn

REPLAY_ENV = "TANDEM_RECURRENT_REPLAY"  # "1": always replay kept tokens (A/B runs)
RECURRENCE_FUNCTIONS = ("gated_delta_update", "ssm_update")  # Qwen3.5 & co.; Mamba 2 & co.
# Mamba 1 blocks: (module, class, whether its `ssm_step` takes one token or the whole sequence)
RECURRENCE_BLOCKS = (("mamba", "MambaBlock", True), ("jamba", "JambaMambaMixer", False))
_MODEL_PACKAGE = "mlx_lm.models."


@dataclass
class RecurrenceCall:
    """One call of a recurrence function during a captured forward, with its arguments."""

    fn: Callable[..., tuple[mx.array, mx.array]]
    arguments: inspect.BoundArguments

    @property
    def state(self) -> Any:
        return self.arguments.arguments.get("state")

    @property
    def mask(self) -> Any:
        return self.arguments.arguments.get("mask")

    @property
    def width(self) -> int:
        return self.arguments.args[0].shape[1]

    def rerun(self, state: mx.array, mask: mx.array, lengths: mx.array) -> mx.array:
        """The state after running the same inputs from `state` over each row's first
        lengths[i] positions (`mask`: those positions)."""
        arguments = dict(self.arguments.arguments)
        arguments["state"], arguments["mask"] = state, mask
        if "lengths" in self.arguments.signature.parameters:  # ssm_update reads its state there
            arguments["lengths"] = lengths
        bound = inspect.BoundArguments(self.arguments.signature, arguments)  # type: ignore[arg-type]
        return self.fn(*bound.args, **bound.kwargs)[1]


@dataclass
class BlockCall:
    """One Mamba 1 mixer run (Mamba, Falcon-Mamba, Jamba) during a captured forward: its input
    (before the in-projection) and its conv and SSM state from before the forward."""

    block: Any
    x: mx.array
    conv_state: mx.array
    state: mx.array
    per_token: bool  # Mamba's `ssm_step` takes one token; Jamba's the whole sequence
    mask: Any = None

    @property
    def width(self) -> int:
        return self.x.shape[1]

    def rerun(self, state: mx.array, mask: mx.array, lengths: mx.array) -> mx.array:
        """The state after each row's first lengths[i] positions (`mask`: those positions):
        the block's own steps again over the same inputs, a position kept only where masked."""
        block = self.block
        x, _ = block.in_proj(self.x).split(indices_or_sections=2, axis=-1)
        u = nn.silu(block.conv1d(mx.concatenate([self.conv_state, x], axis=1)))
        A = -mx.exp(block.A_log)
        keep_shape = (-1,) + (1,) * (state.ndim - 1)
        if self.per_token:
            for t in range(u.shape[1]):
                _, new = block.ssm_step(u[:, t], A, state)
                state = mx.where(mask[:, t].reshape(keep_shape), new, state)
            return state
        # it returns only the last position's state: one run per length a row may keep
        out = state
        for n in range(1, u.shape[1] + 1):
            _, new = block.ssm_step(u[:, :n], A, state)
            out = mx.where((lengths == n).reshape(keep_shape), new, out)
        return out


@dataclass
class ForwardCapture:
    """Every conv input and recurrence call of one forward, in the order the layers ran."""

    conv_inputs: list[mx.array] = field(default_factory=list)
    calls: list[RecurrenceCall | BlockCall] = field(default_factory=list)


_active: ForwardCapture | None = None  # set on the MLX thread around one forward only


def enabled() -> bool:
    return os.environ.get(REPLAY_ENV, "") in ("", "0")


@contextmanager
def capturing(on: bool = True) -> Iterator[ForwardCapture | None]:
    """Record the forward run inside this block (None and no recording when `on` is False);
    `install()` must have run since the model's module was imported."""
    global _active
    if not on:
        yield None
        return
    _active = ForwardCapture()
    try:
        yield _active
    finally:
        _active = None


def install() -> None:
    """Hook nn.Conv1d, and the recurrence functions and blocks of every loaded mlx-lm model module
    (idempotent; a hook records nothing outside `capturing`)."""
    if not getattr(nn.Conv1d.__call__, "tandem_capture", False):
        nn.Conv1d.__call__ = _conv_hook(nn.Conv1d.__call__)
    for name, module in list(sys.modules.items()):
        if not name.startswith(_MODEL_PACKAGE) or module is None:
            continue
        for fn_name in RECURRENCE_FUNCTIONS:
            fn = getattr(module, fn_name, None)
            if callable(fn) and not getattr(fn, "tandem_capture", False):
                setattr(module, fn_name, _call_hook(fn))
        for module_name, class_name, per_token in RECURRENCE_BLOCKS:
            if name != _MODEL_PACKAGE + module_name:
                continue
            block = getattr(module, class_name, None)
            method = getattr(block, "_process_sequence", None)
            if method is not None and not getattr(method, "tandem_capture", False):
                block._process_sequence = _block_hook(method, per_token=per_token)


def _conv_hook(original: Callable[..., mx.array]) -> Callable[..., mx.array]:
    def __call__(self: nn.Conv1d, x: mx.array) -> mx.array:
        if _active is not None:
            _active.conv_inputs.append(x)
        return original(self, x)

    __call__.tandem_capture = True  # type: ignore[attr-defined]
    __call__.__wrapped__ = original  # type: ignore[attr-defined]
    return __call__


def _call_hook(original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    def hooked(*args: Any, **kwargs: Any) -> Any:
        if _active is not None:
            _active.calls.append(RecurrenceCall(original, signature.bind(*args, **kwargs)))
        return original(*args, **kwargs)

    hooked.tandem_capture = True  # type: ignore[attr-defined]
    hooked.__wrapped__ = original  # type: ignore[attr-defined]
    return hooked


def _block_hook(original: Callable[..., Any], *, per_token: bool) -> Callable[..., Any]:
    def _process_sequence(self: Any, x: mx.array, conv_cache: Any, state_cache: Any) -> Any:
        if _active is not None and conv_cache is not None and state_cache is not None:
            _active.calls.append(BlockCall(self, x, conv_cache, state_cache, per_token))
        return original(self, x, conv_cache, state_cache)

    _process_sequence.tandem_capture = True  # type: ignore[attr-defined]
    _process_sequence.__wrapped__ = original  # type: ignore[attr-defined]
    return _process_sequence
