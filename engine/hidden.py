"""The target's final hidden states (its LM head's input) beside its logits, for drafters that
read them (MTP layers, EAGLE-style heads).

mlx-lm models end with `lm_head(norm(h))` or, with tied embeddings, `embed_tokens.as_linear(...)`.
Rather than re-implement every architecture's body, the head module gets a tap: its class is
swapped for a subclass whose call (or `as_linear`) records its input while a split forward runs.
So the logits are always the model's own forward, and the hidden states are exactly what its
head read. `attach` checks this once at load on a tiny input (the head is called exactly once,
on every position, and nothing changes its output afterwards: no softcapping or scaling); a
model that fails the check gets no tap, and drafters that need hidden states are refused with
the reason (`hidden_problem`).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from typing import Any

import mlx.core as mx
import mlx.nn as nn

log = logging.getLogger(__name__)

DEFAULT_CHECK_TOKENS = (1, 2, 3, 5)  # a tiny input for the check at load
HEAD_NAMES = ("lm_head", "output", "embed_out")  # untied heads, by attribute name
EMBEDDING_NAMES = ("embed_tokens", "wte", "tok_embeddings", "word_embeddings", "embedding")
_TAP_ATTR = "_tandem_hidden_tap"


class HiddenStatesUnavailable(RuntimeError):
    """This model's hidden states cannot be split from its head (the message says why)."""


class HiddenTap:
    """Records the input of one module's head call while `active`."""

    def __init__(self, module: nn.Module, method: str) -> None:
        # weak: the module holds the tap, and a cycle would keep an unloaded model's head in
        # memory until Python's collector runs (the app runs it on the GUI thread only)
        self._module = weakref.ref(module)
        self.method = method  # "__call__" (an untied head) or "as_linear" (tied embeddings)
        self.active = False
        self.calls = 0
        self.value: mx.array | None = None

    def record(self, x: mx.array) -> None:
        if self.active:
            self.calls += 1
            self.value = x

    def head(self, hidden: mx.array) -> mx.array:
        """The target's own LM head applied to hidden states (never recorded)."""
        module = self._module()
        if self.method == "as_linear":
            return module.as_linear(hidden)
        return module(hidden)


def _tapped_class(cls: type, method: str) -> type:
    if method == "as_linear":

        def as_linear(self, x, *args, **kwargs):
            getattr(self, _TAP_ATTR).record(x)
            return cls.as_linear(self, x, *args, **kwargs)

        body = {"as_linear": as_linear}
    else:

        def call(self, x, *args, **kwargs):
            getattr(self, _TAP_ATTR).record(x)
            return cls.__call__(self, x, *args, **kwargs)

        body = {"__call__": call}
    return type(f"Tapped{cls.__name__}", (cls,), body)


def _find_head(model: nn.Module) -> tuple[nn.Module, str] | None:
    """The module whose call makes the logits: an untied head, else the input embedding."""
    modules = dict(model.named_modules())
    for suffix, method in ((HEAD_NAMES, "__call__"), (EMBEDDING_NAMES, "as_linear")):
        names = sorted(
            (n for n in modules if n.rsplit(".", 1)[-1] in suffix and hasattr(modules[n], method)),
            key=lambda n: n.count("."),
        )
        if names:
            return modules[names[0]], method
    return None


def attach(model: nn.Module) -> str | None:
    """Put a tap on the model's head and check it once; returns None when `split_forward`
    works for this model, else why not (the tap is then removed)."""
    existing = getattr(model, _TAP_ATTR, None)
    if isinstance(existing, HiddenTap):
        return None
    if isinstance(existing, str):
        return existing
    problem = _attach(model)
    if problem is not None:
        object.__setattr__(model, _TAP_ATTR, problem)
        log.info("hidden states unavailable: %s", problem)
    return problem


def _attach(model: nn.Module) -> str | None:
    found = _find_head(model)
    if found is None:
        return "no LM head or tied embedding was found to take the hidden states from"
    module, method = found
    original = type(module)
    tap = HiddenTap(module, method)
    object.__setattr__(module, _TAP_ATTR, tap)
    module.__class__ = _tapped_class(original, method)
    object.__setattr__(model, _TAP_ATTR, tap)
    try:
        problem = _check(model, tap)
    except Exception as exc:  # noqa: BLE001 - any failure means: no split for this model
        problem = f"the check forward failed: {exc}"
    if problem is not None:
        module.__class__ = original
    return problem


def _check(model: nn.Module, tap: HiddenTap) -> str | None:
    from mlx_lm.models.cache import make_prompt_cache

    tokens = mx.array([list(DEFAULT_CHECK_TOKENS)], dtype=mx.uint32)
    hidden, logits = _run(model, tap, tokens, make_prompt_cache(model))
    if tap.calls != 1:
        return f"its LM head ran {tap.calls} times in one forward"
    n = len(DEFAULT_CHECK_TOKENS)
    if hidden is None or hidden.ndim != 3 or hidden.shape[:2] != (1, n):
        return "its LM head does not read one hidden state per position"
    again = tap.head(hidden)
    if again.shape != logits.shape or not bool(mx.array_equal(again, logits)):
        return "its logits are not its LM head's output alone (e.g. softcapping or scaling)"
    return None


def _run(model: nn.Module, tap: HiddenTap, x: mx.array, cache: Any) -> tuple[Any, mx.array]:
    tap.active, tap.calls, tap.value = True, 0, None
    try:
        logits = model(x, cache=cache)
    finally:
        tap.active = False
    hidden, tap.value = tap.value, None
    return hidden, logits


def tap_of(model: nn.Module) -> HiddenTap:
    """The model's checked tap; HiddenStatesUnavailable with the reason otherwise."""
    tap = getattr(model, _TAP_ATTR, None)
    if tap is None:
        problem = attach(model)
        tap = getattr(model, _TAP_ATTR, None)
        if problem is not None:
            raise HiddenStatesUnavailable(problem)
    if isinstance(tap, str):
        raise HiddenStatesUnavailable(tap)
    return tap


def split_forward(model: nn.Module, x: mx.array, cache: Any) -> tuple[mx.array, mx.array]:
    """One forward of the model: (hidden [B, L, d], the LM head's input after the final norm;
    logits [B, L, V], exactly the model's own)."""
    tap = tap_of(model)
    hidden, logits = _run(model, tap, x, cache)
    if hidden is None:
        raise HiddenStatesUnavailable("the LM head did not run in this forward")
    return hidden, logits


def lm_head(model: nn.Module) -> Callable[[mx.array], mx.array]:
    """The target's own LM head: hidden states -> logits (checked at attach)."""
    return tap_of(model).head


def embedding(model: nn.Module) -> nn.Module:
    """The target's input embedding (tokens -> vectors)."""
    modules = dict(model.named_modules())
    names = sorted(
        (n for n in modules if n.rsplit(".", 1)[-1] in EMBEDDING_NAMES),
        key=lambda n: n.count("."),
    )
    if not names:
        raise HiddenStatesUnavailable("no input embedding was found")
    return modules[names[0]]
