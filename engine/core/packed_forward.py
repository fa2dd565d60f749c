"""One forward for the decoding rows and the prompt chunk that shares their step.

A step that decodes and prefills used to run two forwards: the batch's decode step, then the
prompt's chunk, each reading every weight. On a memory-bound machine (a GPU, Apple silicon) that
read is most of a small batch's decode step; on the 2-core CPU sharing it saves 10-28 ms of a
70 ms step of the default model (`python -m engine.bench.shared_step`). A long prompt beside
running chats paid it twice per step (issue 13: its first token 1.7-2.3x later than alone on the
CPU, 3-3.4x on the H200, while the chats kept their gap).

Here the inputs of all parts are laid end to end in one row of tokens, so the embedding, every
MLP and every norm run once over all of them, and the head over the decoding rows only. Only the
sequence mixers (attention, recurrences: the modules of a layer that take a `cache`) run per
part, each on its own cache with its own mask, exactly as in a forward of that part alone.
Rather than re-implement every architecture, each mixer's class is swapped (per instance) for a
subclass that splits the packed input when it is handed a `PackedLayerCache`, and calls the
original otherwise; masks come from each part's cache (`PackedLayerCache.make_mask`), with the
window and array options the model asked for. `enable` checks this once per model on a tiny
input against separate forwards, splitting the outermost modules that take a cache, else the
innermost; a model whose code reads its caches or masks elsewhere (absolute positions from an
offset, shared KV layers, ...) fails the check and keeps two forwards.
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.cache import make_prompt_cache

from engine.hidden import HiddenStatesUnavailable, tap_of

log = logging.getLogger(__name__)

DEFAULT_CHECK_ROWS = ((3, 1, 4), (5, 9, 2, 6, 5))  # prompts of the check's decoding rows
DEFAULT_CHECK_CHUNK = (7, 1, 8, 2, 8)  # the check's prompt chunk (after one earlier token)
DEFAULT_CHECK_TOLERANCE = 1e-3  # of the logits' scale: rounding passes, a wrong position not
_STATE_ATTR = "_tandem_packing"  # on the model: None (supported) or why not


@dataclass
class Part:
    """One part of a packed forward: `tokens` [rows, width] fed to its per-layer `cache`."""

    tokens: mx.array
    cache: list[Any]

    @property
    def size(self) -> int:
        return self.tokens.shape[0] * self.tokens.shape[1]


class SegmentedMask:
    """Each part's own mask, where a model computed one mask for the packed row."""

    __slots__ = ("masks",)

    def __init__(self, masks: list[Any]) -> None:
        self.masks = masks


class PackedLayerCache:
    """One layer's caches of every part; handed to the model where its cache would go."""

    __slots__ = ("caches", "shapes")

    def __init__(self, caches: list[Any], shapes: list[tuple[int, int]]) -> None:
        self.caches = caches
        self.shapes = shapes  # (rows, width) of each part

    def __bool__(self) -> bool:  # mlx-lm tests `if cache and hasattr(cache, "make_mask")`
        return True

    def make_mask(self, n: int, *args: Any, **kwargs: Any) -> SegmentedMask:
        masks = []
        for cache, (_, width) in zip(self.caches, self.shapes):
            masks.append(cache.make_mask(width, *args, **kwargs) if cache is not None else None)
        return SegmentedMask(masks)


_subclasses: dict[type, type] = {}


def _packed_class(cls: type) -> type:
    """`cls` with a call that runs a packed input part by part."""
    if cls in _subclasses or getattr(cls, "_tandem_packed", False):
        return _subclasses.get(cls, cls)
    signature = inspect.signature(cls.__call__)
    names = list(signature.parameters)[1:]  # after self
    positional = signature.parameters["cache"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    at = names.index("cache") if positional else len(names)  # else: by keyword only

    def call(self, *args, **kwargs):
        # every forward comes through here: the common case costs a lookup, not a bind
        packed = kwargs.get("cache", args[at] if len(args) > at else None)
        if type(packed) is not PackedLayerCache:
            return cls.__call__(self, *args, **kwargs)
        bound = signature.bind(self, *args, **kwargs)
        x = bound.arguments[names[0]]
        mask = bound.arguments.get("mask")
        outputs, start = [], 0
        for i, (cache, (rows, width)) in enumerate(zip(packed.caches, packed.shapes)):
            part = x[:, start : start + rows * width].reshape(rows, width, *x.shape[2:])
            start += rows * width
            arguments = dict(bound.arguments)
            arguments[names[0]] = part
            arguments["cache"] = cache
            if "mask" in arguments:
                arguments["mask"] = mask.masks[i] if isinstance(mask, SegmentedMask) else mask
            arguments.pop("self")
            out = cls.__call__(self, **arguments)
            if not isinstance(out, mx.array) or out.shape[:2] != (rows, width):
                raise TypeError(f"{cls.__name__} does not return one vector per position")
            outputs.append(out.reshape(1, rows * width, *out.shape[2:]))
        return mx.concatenate(outputs, axis=1)

    body = {"__call__": call, "_tandem_packed": True, "__module__": cls.__module__}
    sub = type(f"Packed{cls.__name__}", (cls,), body)
    _subclasses[cls] = sub
    return sub


def _takes_cache(module: nn.Module) -> bool:
    try:
        return "cache" in inspect.signature(type(module).__call__).parameters
    except (TypeError, ValueError):
        return False


def _mixers(model: nn.Module, *, deepest: bool) -> list[nn.Module]:
    """Each layer's modules that take a cache: the only ones that see other positions. The
    outermost such modules, or the innermost (`deepest`: a block that wraps its attention with
    norms, or an attention module that wraps its core, shares more of its work)."""
    found = []
    for layer in model.layers:
        takes = [(name, m) for name, m in layer.named_modules() if name and _takes_cache(m)]
        names = [name for name, _ in takes]
        for name, module in takes:
            inner = any(other.startswith(name + ".") for other in names)
            outer = any(name.startswith(other + ".") for other in names)
            if (not inner) if deepest else (not outer):
                found.append(module)
    return found


def enable(model: nn.Module) -> str | None:
    """Prepare `model` for packed forwards and check them once; None when they work, else why
    not (the mixers then keep their own classes)."""
    state = getattr(model, _STATE_ATTR, "unchecked")
    if state != "unchecked":
        return state
    problem = _enable(model)
    object.__setattr__(model, _STATE_ATTR, problem)
    if problem is not None:
        log.info("packed forwards unavailable: %s", problem)
    return problem


def _enable(model: nn.Module) -> str | None:
    """The outermost modules that take a cache first (what a layer hands its cache to); where
    the check refuses those, the innermost."""
    problems, tried = [], []
    for deepest in (False, True):
        try:
            mixers = _mixers(model, deepest=deepest)
        except Exception as exc:  # noqa: BLE001 - any surprise: no packing for this model
            return f"its layers could not be read: {exc}"
        if not mixers:
            return "no layer module takes a cache"
        if [id(m) for m in mixers] == tried:
            break  # no module inside another: nothing else to try
        problem = _try(model, mixers)
        if problem is None:
            return None
        problems.append(problem)
        tried = [id(m) for m in mixers]
    return problems[0]


def _try(model: nn.Module, mixers: list[nn.Module]) -> str | None:
    originals = [type(m) for m in mixers]
    for module in mixers:
        module.__class__ = _packed_class(type(module))
    try:
        problem = _check(model)
    except Exception as exc:  # noqa: BLE001 - any failure means: two forwards
        problem = f"the check forward failed: {type(exc).__name__}: {exc}"
    if problem is not None:
        for module, cls in zip(mixers, originals):
            module.__class__ = cls
    return problem


def supported(model: nn.Module) -> bool:
    """Whether `enable` found that this model's forwards can be shared."""
    return getattr(model, _STATE_ATTR, "unchecked") is None


def packed_forward(
    model: nn.Module, parts: list[Part], *, hidden: bool = False
) -> list[tuple[mx.array | None, mx.array | None]]:
    """One forward over every part; per part (hidden [rows, width, d] when asked, logits
    [rows, width, V] for the parts whose logits are wanted, the first part's always).
    The head runs only on the first part when the model's head can be split from it."""
    x = mx.concatenate([p.tokens.reshape(1, -1) for p in parts], axis=1)
    layers = len(parts[0].cache)
    shapes = [tuple(p.tokens.shape) for p in parts]
    caches = [PackedLayerCache([p.cache[i] for p in parts], shapes) for i in range(layers)]
    try:
        tap = tap_of(model)
    except HiddenStatesUnavailable:
        tap = None
    if tap is None:
        if hidden:
            raise HiddenStatesUnavailable("this model's hidden states cannot be split")
        logits = model(x, cache=caches)
        return [(None, v) for v in _split(logits, shapes)]
    tap.active, tap.calls, tap.value = True, 0, None
    try:
        model(x, cache=caches)  # its own logits are never evaluated: the head runs below
    finally:
        tap.active = False
    states, tap.value = tap.value, None
    if states is None:
        raise HiddenStatesUnavailable("the LM head did not run in this forward")
    out = []
    for i, h in enumerate(_split(states, shapes)):
        out.append((h if hidden else None, tap.head(h) if i == 0 else None))
    return out


def _split(packed: mx.array, shapes: list[tuple[int, int]]) -> list[mx.array]:
    parts, start = [], 0
    for rows, width in shapes:
        parts.append(packed[0, start : start + rows * width].reshape(rows, width, -1))
        start += rows * width
    return parts


def _check(model: nn.Module) -> str | None:
    """Packed against separate forwards on a tiny batch: two rows of different lengths decoding
    (a ragged batch cache) beside a prompt's chunk."""
    from engine.cache.batch_rows import merge_row_caches

    def setup() -> tuple[list[Any], list[Any]]:
        rows = []
        for prompt in DEFAULT_CHECK_ROWS:
            cache = make_prompt_cache(model)
            model(mx.array([prompt[:-1]], dtype=mx.uint32), cache=cache)
            rows.append(cache)
        batch = merge_row_caches(rows)
        chunk_cache = make_prompt_cache(model)
        model(mx.array([[DEFAULT_CHECK_CHUNK[0]]], dtype=mx.uint32), cache=chunk_cache)
        mx.eval([c.state for c in batch + chunk_cache])
        return batch, chunk_cache

    pending = mx.array([[p[-1]] for p in DEFAULT_CHECK_ROWS], dtype=mx.uint32)
    chunk = mx.array([list(DEFAULT_CHECK_CHUNK[1:])], dtype=mx.uint32)
    after = mx.array([[DEFAULT_CHECK_CHUNK[-1]]], dtype=mx.uint32)  # shows the chunk's cache
    batch, chunk_cache = setup()
    want_rows = model(pending, cache=batch)
    model(chunk, cache=chunk_cache)
    want_next = model(after, cache=chunk_cache)
    mx.eval(want_rows, want_next)
    batch, chunk_cache = setup()
    (_, got_rows), _ = packed_forward(model, [Part(pending, batch), Part(chunk, chunk_cache)])
    mx.eval(got_rows)
    got_next = model(after, cache=chunk_cache)
    for name, got, want in (("rows", got_rows, want_rows), ("prompt", got_next, want_next)):
        if got.shape != want.shape:
            return f"the {name}' logits have shape {got.shape}, not {want.shape}"
        scale = max(float(mx.abs(want).max()), 1e-6)
        error = float(mx.abs(got.astype(mx.float32) - want.astype(mx.float32)).max())
        if error > DEFAULT_CHECK_TOLERANCE * scale:
            return f"the {name}' logits differ from separate forwards ({error:.3g} of {scale:.3g})"
    return None
