"""mlx-lm caches that a model defines for itself, whose `state` is a tuple of optional arrays
followed by the integer offset (deepseek_v41's LayerCache: its sliding window, compressed KV,
index keys and the rows of the group still open), as prompt-cache layers.

Each such class is described once in `KINDS`: the fixed kind name stored in entries, where
mlx-lm defines it (imported only when needed, and an mlx-lm without it simply lacks the kind),
its array attributes in `state`'s order and the integer settings its constructor takes. A file
names a kind; nothing read from it picks a module or a class. One code path stores, checks and
restores them all; describing another such class is one more entry here.

Such a cache cannot be trimmed (it dropped the window's old rows and pooled closed groups):
like recurrent state, an entry of it serves only prompts it is a whole prefix of.

Every function that touches an mx.array runs on the engine's MLX thread only.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mlx.core as mx

Shape = tuple[int, ...]
# (meta, each stored array's shape) -> why they cannot be this cache's state, or None
ShapeCheck = Callable[[dict[str, int], dict[str, Shape]], str | None]


class StateMismatch(ValueError):
    """The cache's state is not the tuple its description says (mlx-lm changed the class)."""


@dataclass(frozen=True)
class TupleStateKind:
    """An mlx-lm cache class whose state is (optional arrays..., offset), built from integer
    settings. Every array is [1, rows, ...]: one row of the batch, rows growing with tokens."""

    name: str  # the kind as entries store it
    module: str
    class_name: str
    fields: tuple[str, ...]  # the array attributes, in the order `state` gives them
    settings: tuple[str, ...]  # constructor keyword arguments, kept as attributes of that name
    check: ShapeCheck | None = None  # what else a well-formed state of this class satisfies

    @property
    def meta_keys(self) -> tuple[str, ...]:
        return ("offset", *self.settings)

    def cls(self) -> type | None:
        """The class, or None when this mlx-lm does not have it."""
        return _load_class(self.module, self.class_name)


@functools.cache
def _load_class(module: str, name: str) -> type | None:
    try:  # an mlx-lm older than the model lacks both
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


def _deepseek_v41(meta: dict[str, int], shapes: dict[str, Shape]) -> str | None:
    """Every forward appends to the window and keeps its last `window_size` rows; pending rows
    and their gates grow together; no part holds more rows than tokens went in."""
    n, size = meta["offset"], meta["window_size"]
    if size < 1:
        return f"a window of {size}"
    flat = [name for name, s in shapes.items() if len(s) != 3]
    if flat:
        return f"{flat[0]} of {len(shapes[flat[0]])} dimensions, not 3"
    held = shapes["window"][1] if "window" in shapes else 0
    if held != min(n, size):
        return f"a window of {held} rows after {n} tokens (it keeps {size})"
    if shapes.get("pending_kv", (0, 0))[:2] != shapes.get("pending_gate", (0, 0))[:2]:
        return "pending rows without their gates"
    too_long = [f for f in ("compress_kv", "index_k", "pending_kv") if shapes.get(f, (1, 0))[1] > n]
    return f"{too_long[0]} holds more rows than {n} tokens" if too_long else None


KINDS: dict[str, TupleStateKind] = {
    k.name: k
    for k in (
        TupleStateKind(
            "deepseek_v41.LayerCache",
            "mlx_lm.models.deepseek_v41",
            "LayerCache",
            fields=("window", "compress_kv", "index_k", "pending_kv", "pending_gate"),
            settings=("window_size",),
            check=_deepseek_v41,
        ),
    )
}


def kind_of(cache: Any) -> TupleStateKind | None:
    """The description of this cache's exact class, if it has one (imports nothing unless
    the cache's class is named in KINDS)."""
    t = type(cache)
    for kind in KINDS.values():
        if (t.__module__, t.__qualname__) == (kind.module, kind.class_name) and t is kind.cls():
            return kind
    return None


def state_parts(kind: TupleStateKind, cache: Any) -> tuple[dict[str, mx.array], dict[str, int]]:
    """The cache's arrays by attribute (the ones that are None left out; nothing evaluated)
    and its integer state. Raises StateMismatch when `state` is not what `kind` says."""
    state = tuple(cache.state)
    arrays = [getattr(cache, f) for f in kind.fields]
    if len(state) != len(kind.fields) + 1 or any(s is not a for s, a in zip(state, arrays)):
        raise StateMismatch(f"{kind.name}'s state is not {', '.join(kind.fields)} and offset")
    meta = {"offset": int(cache.offset)}
    meta.update({s: int(getattr(cache, s)) for s in kind.settings})
    return {f: mx.contiguous(a) for f, a in zip(kind.fields, arrays) if a is not None}, meta


def build(kind: TupleStateKind, arrays: dict[str, mx.array], meta: dict[str, int]) -> Any:
    """A new cache of the kind's class holding `arrays` (taken as they are: pass new array
    objects) with `meta`'s offset and settings."""
    cls = kind.cls()
    if cls is None:
        raise StateMismatch(f"this mlx-lm has no {kind.module}.{kind.class_name}")
    cache = cls(**{s: meta[s] for s in kind.settings})
    for f in kind.fields:
        setattr(cache, f, arrays.get(f))
    cache.offset = meta["offset"]
    if len(cache.state) != len(kind.fields) + 1:
        raise StateMismatch(f"{kind.name}'s state is not {', '.join(kind.fields)} and offset")
    return cache


def check_parts(kind: TupleStateKind, meta: dict[str, int], shapes: dict[str, Shape]) -> None:
    """Raise ValueError unless this could be a state `state_parts` gave for this kind (the
    caller checked that the meta values are non-negative integers)."""
    if set(meta) != set(kind.meta_keys):
        raise ValueError(f"bad {kind.name} state {meta}")
    unknown = sorted(set(shapes) - set(kind.fields))
    if unknown:
        raise ValueError(f"{kind.name} has no arrays {unknown}")
    for name, shape in shapes.items():
        if len(shape) < 2 or shape[0] != 1:
            raise ValueError(f"{kind.name} {name} of shape {shape}")
    why = kind.check(meta, shapes) if kind.check is not None else None
    if why:
        raise ValueError(f"{kind.name}: {why}")
    if kind.cls() is None:
        raise ValueError(f"this mlx-lm has no {kind.module}.{kind.class_name}")
