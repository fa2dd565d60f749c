"""A model's dense MLPs run through `mx.compile` for calls of a few token rows.

A decode step or a verify forward builds the same few ops per MLP per layer every time: the
gate/up product, its two column slices, the activation and the down product. Each op costs the
host a Python call and a graph node, and on CUDA the step's launch waits on that host work
(docs/benchmarks.md). A compiled MLP is traced once per input shape and then replayed from C++:
the same primitives on the same weights, so the same numbers, with the host work of one call.
Wide calls (a prompt's prefill) run the MLP as it is: their shapes change from call to call and
each would be traced anew.

Only dense MLPs are wrapped: a module called `mlp` or `feed_forward` whose children are all
linear projections (mlx-lm's, or Tandem's fused ones). Mixtures of experts route by values and
are left alone.

On by default on a CUDA GPU: on an H100 it cut the host's work for the random 8B's 5-token
forward from 3.5 to 2.9 ms with logits bit-equal; in the engine, alternated in one process, plain
decoding at 1-16 rows ran 0.97-1.47x (median 1.06 over nine points, within this machine's noise
except one chat: 1.04x and 1.06x with every run ahead), and every run was lossless
(docs/benchmarks.md, twenty-first pass). Elsewhere it is opt-in (`TANDEM_COMPILED_MLP=1`): level
on the 2-core CPU, not measured on Metal. `TANDEM_NO_COMPILED_MLP=1` turns it off everywhere.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from engine.device import on_cuda
from engine.fused_projections import FusedProjection, ProjectionPart
from engine.kernels.switch import is_set

log = logging.getLogger(__name__)

ENABLE_ENV = "TANDEM_COMPILED_MLP"  # on where it is not by default (off the CUDA GPU)
DISABLE_ENV = "TANDEM_NO_COMPILED_MLP"
DEFAULT_MAX_ROWS = 16  # token rows a call may have and run compiled (decode and verify steps)
MLP_NAMES = ("mlp", "feed_forward")
LINEAR_KINDS = (nn.Linear, nn.QuantizedLinear, FusedProjection, ProjectionPart)
_switch = {"on": True}  # all wrappers at once: A/B runs in one process


def set_compiled(on: bool) -> None:
    """Run every wrapped MLP compiled (True) or as it is (False)."""
    _switch["on"] = on


@contextmanager
def uncompiled_mlps() -> Iterator[None]:
    """Within the block every MLP runs as mlx-lm ships it (a benchmark's baselines)."""
    before = _switch["on"]
    set_compiled(False)
    try:
        yield
    finally:
        set_compiled(before)


class CompiledCall:
    """The `__call__` of a compiled MLP's class: the compiled function for calls of at most
    its row limit, the class's own call for every other."""

    def __call__(self, x: mx.array, *args: Any, **kwargs: Any) -> mx.array:
        state = self._tandem_compiled
        if (
            args
            or kwargs
            or state.failed
            or not _switch["on"]
            or x.size > state.max_rows * x.shape[-1]
        ):
            return super().__call__(x, *args, **kwargs)
        try:
            return state.fn(x)
        except Exception as exc:  # noqa: BLE001 - an op compile cannot trace keeps the MLP as is
            state.failed = True
            log.warning("an MLP runs uncompiled: %s: %s", type(exc).__name__, exc)
            return super().__call__(x)


class _Compiled:
    """One MLP's compiled function and row limit (an attribute, outside the parameter tree)."""

    def __init__(self, fn: Any, max_rows: int) -> None:
        self.fn = fn
        self.max_rows = max_rows
        self.failed = False


_classes: dict[type, type] = {}


def _compiled_class(cls: type) -> type:
    """`cls` with CompiledCall's `__call__` (one subclass per class): the module keeps its
    parameters and their names, so loading, counting and copying weights see no change."""
    if cls not in _classes:
        _classes[cls] = type(f"Compiled{cls.__name__}", (CompiledCall, cls), {})
    return _classes[cls]


def is_compiled(module: nn.Module) -> bool:
    return isinstance(module, CompiledCall)


def wanted() -> bool:
    """On a CUDA GPU unless DISABLE_ENV is set; elsewhere only with ENABLE_ENV."""
    if is_set(DISABLE_ENV):
        return False
    return is_set(ENABLE_ENV) or on_cuda()


def is_dense_mlp(module: nn.Module) -> bool:
    """At least two child modules, all linear projections, and no lists or dicts of modules (an
    MLP, not a lone projection or a mixture of experts)."""
    children = list(module.children().values())
    modules = [v for v in children if isinstance(v, nn.Module)]
    nested = [v for v in children if not isinstance(v, nn.Module)]
    return (
        len(modules) >= 2 and not any(nested) and all(isinstance(v, LINEAR_KINDS) for v in modules)
    )


def compile_mlps(model: nn.Module, *, max_rows: int = DEFAULT_MAX_ROWS, force: bool = False) -> int:
    """Wrap every dense MLP of `model` in place; returns how many. Only where `wanted()` (or
    `force`, for tests and benchmarks)."""
    if not force and not wanted():
        return 0
    wrapped = 0
    for _, module in list(model.named_modules()):
        for name in MLP_NAMES:
            child = module.get(name)
            if isinstance(child, nn.Module) and not is_compiled(child) and is_dense_mlp(child):
                # the weights are captured as constants: Tandem never changes a loaded model's
                # arrays in place
                fn = mx.compile(type(child).__call__.__get__(child))
                child.__class__ = _compiled_class(type(child))
                child._tandem_compiled = _Compiled(fn, max_rows)
                wrapped += 1
    if wrapped:
        log.info("%d MLPs compiled for calls of up to %d token rows", wrapped, max_rows)
    return wrapped
