"""The shape of the caches a model makes, and the check that a stored entry fits it.

A namespace names the weights an entry was made with, but a mislabelled or stale file must still
never reach a forward: a layer of the wrong kind, head count, head size or dtype fails inside
attention ("[concatenate] All the input array dimensions must match"), for every request that
matches it. So each entry is compared with the model's layout before it is restored.

`probe_layout` builds (never evaluates) a one-token forward over fresh caches: MLX infers every
shape and dtype while building the graph, so the probe costs no compute.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mlx.core as mx

from engine.cache import tuple_state
from engine.cache.kv_quant import DEFAULT_KV_GROUP_SIZE
from engine.cache.layers import ARRAYS, CHUNKED, KV, QUANTIZED, ROTATING, LayerInfo, dtype_name

DEFAULT_PROBE_TOKENS = 16


@dataclass(frozen=True)
class LayerLayout:
    """What one layer's cache holds: kind, heads, key and value sizes, dtype, window."""

    kind: str
    heads: int
    key_dim: int
    value_dim: int
    dtype: str
    max_size: int | None = None  # sliding window (RotatingKVCache)
    keep: int | None = None
    chunk_size: int | None = None  # chunked attention (ChunkedKVCache)
    parts: tuple[tuple[tuple[int, ...], str], ...] = ()  # recurrent state: (shape, dtype) each
    # a tuple-state cache (engine/cache/tuple_state.py): its settings, and each array the probe
    # made as (attribute, shape past the rows, dtype)
    settings: tuple[tuple[str, int], ...] = ()
    fields: tuple[tuple[str, tuple[int, ...], str], ...] = ()


@dataclass(frozen=True)
class CacheLayout:
    """The layers of one model's single-row cache."""

    layers: tuple[LayerLayout, ...]

    def mismatch(
        self, infos: list[LayerInfo], *, kv_bits: int | None, kv_group_size: int
    ) -> str | None:
        """Why the stored layers cannot be restored into this model, or None when they fit.
        A plain layer may be stored quantized when KV quantization is on (with its settings)."""
        if len(infos) != len(self.layers):
            return f"{len(infos)} layers stored, the model has {len(self.layers)}"
        for i, (info, want) in enumerate(zip(infos, self.layers)):
            why = _layer_mismatch(info, want, kv_bits, kv_group_size)
            if why:
                return f"layer {i}: {why}"
        return None


@dataclass(frozen=True)
class ModelLayouts:
    """What entries restored for one model set-up must fit: the target's layout, the draft
    model's (when one is loaded) and the KV quantization settings."""

    target: CacheLayout
    draft: CacheLayout | None = None
    kv_bits: int | None = None
    kv_group_size: int = DEFAULT_KV_GROUP_SIZE

    def mismatch(self, target: list[LayerInfo], draft: list[LayerInfo] | None) -> str | None:
        """Why an entry with these layers cannot be restored, or None when it fits. Stored
        draft layers are checked only when a draft model is loaded (only then are they used)."""
        q = {"kv_bits": self.kv_bits, "kv_group_size": self.kv_group_size}
        why = self.target.mismatch(target, **q)
        if why is None and draft is not None and self.draft is not None:
            why = self.draft.mismatch(draft, kv_bits=None, kv_group_size=self.kv_group_size)
            why = None if why is None else f"draft {why}"
        return why


def _layer_mismatch(
    info: LayerInfo, want: LayerLayout, kv_bits: int | None, kv_group_size: int
) -> str | None:
    quantized = info.kind == QUANTIZED and want.kind == KV and kv_bits is not None
    if info.kind != want.kind and not quantized:
        return f"{info.kind} stored, the model makes {want.kind}"
    if info.kind in tuple_state.KINDS:
        return _tuple_state_mismatch(info, want)
    if info.kind == ARRAYS:
        stored = tuple((shape[1:], dtype) for shape, dtype in info.arrays.values())
        model = tuple((shape[1:], dtype) for shape, dtype in want.parts)
        return None if stored == model else f"recurrent state {stored}, the model's {model}"
    if info.kind == ROTATING and (info.meta["max_size"], info.meta["keep"]) != (
        want.max_size,
        want.keep,
    ):
        return f"window {info.meta['max_size']}/{info.meta['keep']}, the model's {want.max_size}"
    if info.kind == CHUNKED and info.meta["chunk_size"] != want.chunk_size:
        return f"chunks of {info.meta['chunk_size']}, the model's {want.chunk_size}"
    if not quantized:
        expected = {
            "keys": (want.heads, want.key_dim, want.dtype),
            "values": (want.heads, want.value_dim, want.dtype),
        }
    else:
        bits, group = info.meta["bits"], info.meta["group_size"]
        if (bits, group) != (kv_bits, kv_group_size):
            return f"quantized {bits}-bit/{group}, the settings are {kv_bits}-bit/{kv_group_size}"
        expected = {}
        for part, dim in (("keys", want.key_dim), ("values", want.value_dim)):
            if dim * bits % 32 or dim % group:
                return f"{part} of size {dim} cannot be quantized {bits}-bit/{group}"
            expected[f"{part}.0"] = (want.heads, dim * bits // 32, "uint32")
            expected[f"{part}.1"] = (want.heads, dim // group, want.dtype)
            expected[f"{part}.2"] = (want.heads, dim // group, want.dtype)
    for name, (heads, dim, dtype) in expected.items():
        shape, got_dtype = info.arrays[name]
        if (shape[1], shape[3], got_dtype) != (heads, dim, dtype):
            return (
                f"{name} {shape[1]} heads x {shape[3]} {got_dtype}, "
                f"the model's {heads} x {dim} {dtype}"
            )
    return None


def _tuple_state_mismatch(info: LayerInfo, want: LayerLayout) -> str | None:
    """Settings must be the model's; each array the probe made must have its size past the
    rows and its dtype (one the probe's few tokens did not make, e.g. compressed groups longer
    than the probe, is checked only for its form, by check_info)."""
    stored = tuple((name, info.meta[name]) for name, _ in want.settings)
    if stored != want.settings:
        return f"{info.kind} {dict(stored)}, the model's {dict(want.settings)}"
    model = {name: (shape, dtype) for name, shape, dtype in want.fields}
    for name, (shape, dtype) in info.arrays.items():
        if name in model and (shape[2:], dtype) != model[name]:
            return f"{name} {shape[2:]} {dtype}, the model's {model[name][0]} {model[name][1]}"
    return None


def _tuple_state_layout(kind: tuple_state.TupleStateKind, cache: Any) -> LayerLayout:
    settings = tuple((name, int(getattr(cache, name))) for name in kind.settings)
    fields = tuple(
        (name, tuple(a.shape[2:]), dtype_name(a.dtype))
        for name in kind.fields
        if (a := getattr(cache, name)) is not None
    )
    return LayerLayout(kind.name, 0, 0, 0, "", settings=settings, fields=fields)


def probe_layout(
    model: Any,
    make_cache: Callable[[], list[Any]],
    *,
    flat: Callable[[list[Any]], Any] = iter,
) -> CacheLayout:
    """The layout of `make_cache()` after `model` wrote a few tokens into it (graph only), layer
    by layer as `flat` lists them (the prompt cache stores a CacheList's members one by one).
    Several tokens, so that state that grows to a fixed length (an n-gram model's context of
    recent tokens) has the shape a stored entry has."""
    caches = make_cache()
    model(mx.zeros((1, DEFAULT_PROBE_TOKENS), dtype=mx.int32), cache=caches)
    layers = []
    for c in flat(caches):
        described = tuple_state.kind_of(c)
        if described is not None:
            layers.append(_tuple_state_layout(described, c))
            continue
        kind = type(c).__name__
        if kind == ARRAYS and all(a is not None for a in c.cache):
            parts = tuple((tuple(a.shape), dtype_name(a.dtype)) for a in c.cache)
            layers.append(LayerLayout(kind, 0, 0, 0, "", parts=parts))
            continue
        if kind not in (KV, ROTATING, CHUNKED) or c.keys is None:
            layers.append(LayerLayout(kind, 0, 0, 0, ""))  # nothing stored can match it
            continue
        keys, values = c.keys, c.values
        window = (int(c.max_size), int(c.keep)) if kind == ROTATING else (None, None)
        layers.append(
            LayerLayout(
                kind,
                heads=keys.shape[1],
                key_dim=keys.shape[3],
                value_dim=values.shape[3],
                dtype=dtype_name(keys.dtype),
                max_size=window[0],
                keep=window[1],
                chunk_size=int(c.chunk_size) if kind == CHUNKED else None,
            )
        )
    return CacheLayout(tuple(layers))
