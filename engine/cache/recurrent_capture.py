"""What a verify forward fed the recurrent layers, kept so that rows which keep only part of their
draft get their state recomputed from it instead of feeding their kept tokens again.

Gated-delta layers (Qwen3.5 / Qwen3.6, Qwen3-Next and the rest that call mlx-lm's
`gated_delta_update`), Mamba 2 layers (`ssm_update`: Mamba 2, Nemotron-H, Granite 4 hybrids,
Falcon-H1, ...), Mamba 1 blocks (`_process_sequence`: Mamba, Falcon-Mamba, Jamba) and
RecurrentGemma's (its own conv, `rnn_scan`) hold the convolutions' last inputs and the
recurrence's state; LFM2's short convs hold only the former; RWKV 7 holds the last input of its
two token shifts and the state of `_wkv7`. During a captured forward every conv input (a token
shift's is its state and its input: a conv of width one) and every recurrence call is recorded
(engine/cache/recurrent_calls.py); afterwards (engine/cache/recurrent.py, `RecomputePlan`) a
short row's convolution state is the window of its captured input that ends at its last kept
position (the gather the layer itself does for a row with `lengths`), and its recurrence state
is the same function run again from the state before the forward over the kept positions only.
One recurrence call per layer over at most k+1 positions replaces a second pass of every kept
token through the whole model. Layers that ignore `lengths` (Mamba 1, Jamba, Nemotron-H, OLMo
hybrid, RWKV 7, RecurrentGemma) take a padded row's padding into its state; recomputing every
padded row undoes that, which is what lets such models speculate (engine/core/batch_check.py,
`padding_check`). Models whose layers do not fit this shape keep the replay, or are refused
speculation where padding would enter their state.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from engine.cache.recurrent_calls import (
    BlockCall,
    Call,
    GlaCall,
    PrefixCall,
    RecurrenceCall,
    ScanCall,
)

REPLAY_ENV = "TANDEM_RECURRENT_REPLAY"  # "1": always replay kept tokens (A/B runs)
RECURRENCE_FUNCTIONS = ("gated_delta_update", "ssm_update")  # Qwen3.5 & co.; Mamba 2 & co.
# recurrences of one model that take a mask: (module, function, state argument, time axis)
MODULE_RECURRENCES = (("bailing_hybrid", "recurrent_gla", "h", 2),)
# Mamba 1 blocks: (module, class, whether its `ssm_step` takes one token or the whole sequence)
RECURRENCE_BLOCKS = (("mamba", "MambaBlock", True), ("jamba", "JambaMambaMixer", False))
# module-level scans, each recorded as its call kind from its arguments (None: not recorded)
SCAN_FUNCTIONS: tuple[tuple[str, str, Callable[..., Call | None]], ...] = (
    ("recurrent_gemma", "rnn_scan", ScanCall.recorded),
    ("bailing_moe_linear", "recurrent_gla", GlaCall.recorded),
)
PREFIX_METHODS = (("rwkv7", "Rwkv7TimeMixing", "_wkv7"),)  # (module, class, method)
# layers whose state is their last inputs: (module, class, method, its input and state
# arguments, their time axis)
STATE_WINDOWS = (
    ("recurrent_gemma", "Conv1d", "__call__", "x", "cache", 1),
    ("rwkv7", "TokenShift", "__call__", "x", "state", 1),
    ("baichuan_m1", "Attention", "_custom_convolution", "u", "state", 2),  # k and v: [B, H, L, D]
)
_MODEL_PACKAGE = "mlx_lm.models."


@dataclass
class Window:
    """A conv input whose time axis is not axis 1: the state followed by the new inputs."""

    values: mx.array
    axis: int


@dataclass
class ForwardCapture:
    """Every conv input and recurrence call of one forward, in the order the layers ran."""

    conv_inputs: list[mx.array | Window] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)


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
        short = name[len(_MODEL_PACKAGE) :]
        for fn_name in RECURRENCE_FUNCTIONS:
            _hook_function(module, fn_name, _call_hook)
        for module_name, fn_name, state_name, axis in MODULE_RECURRENCES:
            if short == module_name:
                _hook_function(module, fn_name, _call_hook, state_name, axis)
        for module_name, fn_name, record in SCAN_FUNCTIONS:
            if short == module_name:
                _hook_function(module, fn_name, _scan_hook, record)
        for module_name, class_name, per_token in RECURRENCE_BLOCKS:
            if short == module_name:
                _hook_method(module, class_name, "_process_sequence", _block_hook, per_token)
        for module_name, class_name, method_name in PREFIX_METHODS:
            if short == module_name:
                _hook_method(module, class_name, method_name, _prefix_hook)
        for module_name, class_name, method_name, *window in STATE_WINDOWS:
            if short == module_name:
                _hook_method(module, class_name, method_name, _window_hook, *window)


def _hook_function(module: Any, fn_name: str, hook: Any, *extra: Any) -> None:
    fn = getattr(module, fn_name, None)
    if callable(fn) and not getattr(fn, "tandem_capture", False):
        setattr(module, fn_name, hook(fn, *extra))


def _hook_method(module: Any, class_name: str, method_name: str, hook: Any, *extra: Any) -> None:
    cls = getattr(module, class_name, None)
    method = getattr(cls, method_name, None)
    if method is not None and not getattr(method, "tandem_capture", False):
        setattr(cls, method_name, hook(method, *extra))


def _conv_hook(original: Callable[..., mx.array]) -> Callable[..., mx.array]:
    def __call__(self: nn.Conv1d, x: mx.array) -> mx.array:
        if _active is not None:
            _active.conv_inputs.append(x)
        return original(self, x)

    return _mark(__call__, original)


def _call_hook(
    original: Callable[..., Any], state_name: str = "state", axis: int = 1
) -> Callable[..., Any]:
    signature = inspect.signature(original)

    def hooked(*args: Any, **kwargs: Any) -> Any:
        if _active is not None:
            bound = signature.bind(*args, **kwargs)
            if bound.arguments.get(state_name) is not None:
                _active.calls.append(RecurrenceCall(original, bound, state_name, axis))
        return original(*args, **kwargs)

    return _mark(hooked, original)


def _block_hook(original: Callable[..., Any], per_token: bool) -> Callable[..., Any]:
    def _process_sequence(self: Any, x: mx.array, conv_cache: Any, state_cache: Any) -> Any:
        if _active is not None and conv_cache is not None and state_cache is not None:
            _active.calls.append(BlockCall(self, x, conv_cache, state_cache, per_token))
        return original(self, x, conv_cache, state_cache)

    return _mark(_process_sequence, original)


def _scan_hook(
    original: Callable[..., Any], record: Callable[..., Call | None]
) -> Callable[..., Any]:
    signature = inspect.signature(original)

    def hooked(*args: Any, **kwargs: Any) -> Any:
        if _active is not None:
            call = record(*_arguments(signature, *args, **kwargs))
            if call is not None:
                _active.calls.append(call)
        return original(*args, **kwargs)

    return _mark(hooked, original)


def _prefix_hook(original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    def hooked(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _active is not None:
            *inputs, state = _arguments(signature, self, *args, **kwargs)
            if state is not None:
                bound = functools.partial(original, self)
                _active.calls.append(PrefixCall(bound, tuple(inputs[1:]), state))
        return original(self, *args, **kwargs)

    return _mark(hooked, original)


def _window_hook(
    original: Callable[..., Any], input_name: str, state_name: str, axis: int
) -> Callable[..., Any]:
    """A layer whose state is its last inputs records its state followed by its input: the conv
    input of a conv with no weights, which the recompute slices like any other."""
    signature = inspect.signature(original)

    def hooked(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _active is not None:
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            x, state = bound.arguments[input_name], bound.arguments[state_name]
            if state is not None:
                values = mx.concatenate([state, x], axis=axis)
                _active.conv_inputs.append(values if axis == 1 else Window(values, axis))
        return original(self, *args, **kwargs)

    return _mark(hooked, original)


def _arguments(signature: inspect.Signature, *args: Any, **kwargs: Any) -> list[Any]:
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    return list(bound.arguments.values())


def _mark(hook: Callable[..., Any], original: Callable[..., Any]) -> Callable[..., Any]:
    hook.tandem_capture = True  # type: ignore[attr-defined]
    hook.__wrapped__ = original  # type: ignore[attr-defined]
    return hook
