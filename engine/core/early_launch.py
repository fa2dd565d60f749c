"""A forward's first layers launched on the device while the host still builds the rest.

MLX builds a forward's graph in Python and runs it only when it is evaluated, so the device
waits for the whole build: on an H100 the random 8B's build took 3.0 ms of a 5-token
verify forward's 12.6 (docs/benchmarks.md, twenty-first pass). A plain step hides it behind the
step before (engine/core/batch.py), but a verify round in series cannot: its drafts need the
round before read back. Here every `DEFAULT_LAYERS_PER_LAUNCH`-th decoder layer queues its
output (`mx.async_eval`) as soon as it is built, so the device runs those layers while Python
builds the next ones. The same ops on the same arrays: the numbers do not change.

Only the batch's own forwards do this (`DecodeBatch._forward`, through `launching_early`); the
benchmark's baselines and every other caller of the model run it as mlx-lm does. Opt-in
(`TANDEM_EARLY_LAUNCH=1`): it does not pay on CUDA. On an H200 each `async_eval` in mid-build
added 0.4-3.3 ms to the host's build (the kernel launches of the layers before it happen there),
so a bare 5-token forward of the random 8B took longer at every launch interval (9.4-10.2 ms
against 9.1), and the engine, alternated in one process, read 0.98x plain and
0.96x synthetic at one chat, 0.90x / 0.92x at four (docs/benchmarks.md, twenty-fourth pass); on
the 2-core CPU it was level (twenty-second pass); Metal is not measured.
`TANDEM_NO_EARLY_LAUNCH=1` turns it off where it is on.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten

from engine.kernels.switch import is_set

ENABLE_ENV = "TANDEM_EARLY_LAUNCH"
DISABLE_ENV = "TANDEM_NO_EARLY_LAUNCH"
DEFAULT_LAYERS_PER_LAUNCH = 8  # a launch per 8 layers (each async_eval costs the host)
_state = {"on": True, "active": False}  # the switch (A/B runs), and inside a batch forward
_MARK = "_tandem_early_launch"  # on the model: how many layers launch early (0: none)

F = TypeVar("F", bound=Callable[..., Any])


def wanted() -> bool:
    """With ENABLE_ENV set, unless DISABLE_ENV is too."""
    return is_set(ENABLE_ENV) and not is_set(DISABLE_ENV)


def set_early_launch(on: bool) -> None:
    """Launch early in the batch's forwards (True) or not (False): A/B runs in one process."""
    _state["on"] = on


class LaunchesEarly:
    """Mixin of a decoder layer's class: within a batch forward, its output is queued on the
    device as soon as it is built."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        out = super().__call__(*args, **kwargs)
        if _state["active"]:
            arrays = [out] if isinstance(out, mx.array) else [v for _, v in tree_flatten(out)]
            mx.async_eval([a for a in arrays if isinstance(a, mx.array)])
        return out


_classes: dict[type, type] = {}


def _early_class(cls: type) -> type:
    if cls not in _classes:
        _classes[cls] = type(f"Early{cls.__name__}", (LaunchesEarly, cls), {})
    return _classes[cls]


def enable(model: nn.Module, *, every: int | None = None) -> int:
    """Make every `every`-th decoder layer of `model` (DEFAULT_LAYERS_PER_LAUNCH; the last
    excepted: the forward's own eval queues it) launch early; returns how many. Once a model."""
    done = model.__dict__.get(_MARK)
    if done is not None:
        return done
    every = every or DEFAULT_LAYERS_PER_LAUNCH
    layers = list(getattr(model, "layers", None) or [])
    chosen = [layer for i, layer in enumerate(layers[:-1]) if (i + 1) % every == 0]
    for layer in chosen:
        if isinstance(layer, nn.Module) and not isinstance(layer, LaunchesEarly):
            layer.__class__ = _early_class(type(layer))
    model.__dict__[_MARK] = len(chosen)
    return len(chosen)


def launching_early(forward: F) -> F:
    """Decorates a DecodeBatch method that runs `self.model`: its layers launch early where
    `wanted()`."""

    @functools.wraps(forward)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not _state["on"] or _state["active"] or not wanted() or not enable(self.model):
            return forward(self, *args, **kwargs)
        _state["active"] = True
        try:
            return forward(self, *args, **kwargs)
        finally:
            _state["active"] = False

    return run  # type: ignore[return-value]
