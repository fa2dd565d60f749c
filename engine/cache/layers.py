"""One layer's KV cache as a stored value.

`snapshot` takes an mlx-lm single-row cache as a `LayerState` (compact arrays plus the small
integer state) without evaluating anything, `trim_state` cuts a state down to fewer tokens,
`to_cache` builds a fresh mlx-lm cache object from a state. `numpy_views` (zero-copy, of evaluated
arrays) and `from_numpy` give the plain form the disk tier writes and reads. `LayerInfo` describes
a layer without its data (kind, integer state, each array's shape and dtype); `check_info` says
whether such a description is one this module could have made.

Supported: KVCache, RotatingKVCache (sliding window), QuantizedKVCache, ChunkedKVCache (llama4's
chunked attention: positions from `start` on; trimmable only while it never dropped its front),
ArraysCache (the recurrent state of hybrid and state-space models, which cannot be trimmed:
an entry of it serves only prompts it is a whole prefix of) and the model-defined caches whose
state is a tuple of optional arrays and an offset (engine/cache/tuple_state.py: deepseek_v41's
LayerCache; untrimmable too). Anything else (batch caches; a CacheList is stored as its
members, engine/cache/reuse.py) raises `UnsupportedCache`.

Every function that touches an mx.array runs on the engine's MLX thread only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import numpy as np
from mlx_lm.models.cache import (
    ArraysCache,
    ChunkedKVCache,
    KVCache,
    QuantizedKVCache,
    RotatingKVCache,
)

from engine.cache import mlx_lm_private as private
from engine.cache import tuple_state

KV = "KVCache"
ROTATING = "RotatingKVCache"
QUANTIZED = "QuantizedKVCache"
ARRAYS = "ArraysCache"
CHUNKED = "ChunkedKVCache"
SUPPORTED = (KV, ROTATING, QUANTIZED, ARRAYS, CHUNKED)
_CLASSES = {
    KV: KVCache,
    ROTATING: RotatingKVCache,
    QUANTIZED: QuantizedKVCache,
    ARRAYS: ArraysCache,
    CHUNKED: ChunkedKVCache,
}
# the integer state each kind stores; nothing else is accepted from a file
META_KEYS = {
    KV: ("offset",),
    ROTATING: ("offset", "keep", "max_size", "idx"),
    QUANTIZED: ("offset", "group_size", "bits"),
    ARRAYS: ("offset", "parts"),
    CHUNKED: ("offset", "chunk_size", "start"),
}
QUANT_BITS = (2, 3, 4, 5, 6, 8)
QUANT_GROUP_SIZES = (32, 64, 128)
# dtype name -> the numpy dtype its bits travel as (bf16 as its uint16 bits)
STORED_DTYPES = {
    "float32": np.float32,
    "float16": np.float16,
    "bfloat16": np.uint16,
    "uint32": np.uint32,
    "int64": np.int64,  # token ids some models keep as state (longcat_flash_ngram's n-gram context)
}
Shape = tuple[int, ...]


class UnsupportedCache(Exception):
    """This cache cannot be stored; `reason` is the stats key it is counted under."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(detail or reason)
        self.reason = reason


@dataclass(frozen=True)
class LayerInfo:
    """A stored layer without its data: what the disk header and the model checks look at."""

    kind: str
    meta: dict[str, int]
    arrays: dict[str, tuple[Shape, str]]  # name -> (shape, dtype name)

    @property
    def offset(self) -> int:
        return self.meta["offset"]

    @property
    def trimmable(self) -> bool:
        return layer_trimmable(self.kind, self.meta)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "meta": dict(self.meta),
            "arrays": {k: {"shape": list(s), "dtype": d} for k, (s, d) in self.arrays.items()},
        }


@dataclass
class LayerState:
    """One layer's cache: its arrays (possibly not evaluated yet) and integer state."""

    kind: str  # the mlx-lm class name, or a kind of engine/cache/tuple_state.py
    arrays: dict[str, mx.array]  # "keys"/"values", "keys.0".."values.2" when quantized, ...
    meta: dict[str, int]  # offset; keep/max_size/idx (rotating); group_size/bits (quantized)

    @property
    def offset(self) -> int:
        return self.meta["offset"]

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays.values())

    @property
    def trimmable(self) -> bool:
        return layer_trimmable(self.kind, self.meta)

    def info(self) -> LayerInfo:
        arrays = {k: (tuple(a.shape), dtype_name(a.dtype)) for k, a in self.arrays.items()}
        return LayerInfo(self.kind, dict(self.meta), arrays)


def layer_trimmable(kind: str, meta: dict[str, int]) -> bool:
    """Can this layer be cut down to fewer tokens? A sliding window only while it never wrapped,
    a chunked cache only while it holds every position; recurrent state never."""
    if kind == ROTATING:
        return meta["offset"] < meta["max_size"]
    if kind == CHUNKED:
        return meta["start"] == 0
    return kind != ARRAYS and kind not in tuple_state.KINDS


def dtype_name(dtype: mx.Dtype) -> str:
    return str(dtype).rsplit(".", 1)[-1]


def _fresh(a: mx.array) -> mx.array:
    return a[...]  # a new array object: in-place updates on it never reach the stored one


def _compact(a: mx.array, n: int) -> mx.array:
    """The first n positions (axis 2) as their own buffer, not a view pinning a larger one."""
    if a.shape[2] != n:
        a = a[..., :n, :]
    return mx.contiguous(a)


def snapshot(cache: Any, tokens: int | None = None) -> LayerState:
    """One layer's cache as a compact, independent LayerState. Nothing is evaluated here: the
    copies are made when the caller evaluates `state.arrays` (the prompt cache spreads that
    over the engine's steps). Recurrent state does not count its tokens: `tokens` says how many
    it holds."""
    described = tuple_state.kind_of(cache)
    if described is not None:
        return _snapshot_tuple(described, cache)
    kind = type(cache).__name__
    if kind not in SUPPORTED or type(cache) is not _CLASSES[kind]:
        raise UnsupportedCache("unsupported-cache", f"cannot store {kind}")
    if kind == ARRAYS:
        return _snapshot_arrays(cache, tokens)
    n = int(cache.offset)
    if cache.keys is None:
        raise UnsupportedCache("empty-cache", f"{kind} holds no arrays")
    if kind == KV:
        state = LayerState(
            kind,
            {"keys": _compact(cache.keys, n), "values": _compact(cache.values, n)},
            {"offset": n},
        )
    elif kind == CHUNKED:
        state = _snapshot_chunked(cache)
    elif kind == QUANTIZED:
        arrays = {f"keys.{i}": _compact(a, n) for i, a in enumerate(cache.keys)}
        arrays.update({f"values.{i}": _compact(a, n) for i, a in enumerate(cache.values)})
        meta = {"offset": n, "group_size": int(cache.group_size), "bits": int(cache.bits)}
        state = LayerState(kind, arrays, meta)
    else:
        state = _snapshot_rotating(cache)
    for name, a in state.arrays.items():
        if dtype_name(a.dtype) not in STORED_DTYPES:
            raise UnsupportedCache("unsupported-dtype", f"cannot store {name} of {a.dtype}")
    return state


def _snapshot_arrays(cache: ArraysCache, tokens: int | None) -> LayerState:
    if tokens is None or any(a is None for a in cache.cache):
        raise UnsupportedCache("empty-cache", "recurrent state of an unknown length")
    arrays = {f"state.{j}": mx.contiguous(a) for j, a in enumerate(cache.cache)}
    for name, a in arrays.items():
        if dtype_name(a.dtype) not in STORED_DTYPES:
            raise UnsupportedCache("unsupported-dtype", f"cannot store {name} of {a.dtype}")
    return LayerState(ARRAYS, arrays, {"offset": tokens, "parts": len(arrays)})


def _snapshot_tuple(kind: tuple_state.TupleStateKind, cache: Any) -> LayerState:
    try:
        arrays, meta = tuple_state.state_parts(kind, cache)
    except tuple_state.StateMismatch as exc:
        raise UnsupportedCache("unsupported-cache", str(exc)) from None
    if meta["offset"] <= 0 or not arrays:
        raise UnsupportedCache("empty-cache", f"{kind.name} holds no tokens")
    for name, a in arrays.items():
        if dtype_name(a.dtype) not in STORED_DTYPES:
            raise UnsupportedCache("unsupported-dtype", f"cannot store {name} of {a.dtype}")
    return LayerState(kind.name, arrays, meta)


def _snapshot_chunked(cache: ChunkedKVCache) -> LayerState:
    n, start, size = int(cache.offset), int(cache.start_position), int(cache.chunk_size)
    # the next query's chunk begins at (n // size) * size: its keys must all be held
    if not 0 <= start <= (n // size) * size:
        raise UnsupportedCache("unsupported-cache", f"chunked cache from {start} at {n}")
    held = n - start
    arrays = {"keys": _compact(cache.keys, held), "values": _compact(cache.values, held)}
    return LayerState(CHUNKED, arrays, {"offset": n, "chunk_size": size, "start": start})


def _snapshot_rotating(cache: RotatingKVCache) -> LayerState:
    n, keep, max_size = int(cache.offset), int(cache.keep), int(cache.max_size)
    meta = {"offset": n, "keep": keep, "max_size": max_size}
    keys, values = cache.keys, cache.values
    if n < max_size:
        # never wrapped: positions 0..n-1 in order, so it stays trimmable
        return LayerState(
            ROTATING, {"keys": _compact(keys, n), "values": _compact(values, n)}, {**meta, "idx": n}
        )
    # wrapped: store the window in temporal order, `keep` sink tokens plus the newest ones; this
    # is the state mlx-lm itself reaches (its next update trims to the same positions)
    keys = private.rotating_in_temporal_order(cache, keys)
    values = private.rotating_in_temporal_order(cache, values)
    size = keys.shape[2]
    if size < max_size:  # not a shape mlx-lm produces; store it untouched
        arrays = {"keys": mx.contiguous(cache.keys), "values": mx.contiguous(cache.values)}
        return LayerState(ROTATING, arrays, {**meta, "idx": private.write_index(cache)})
    if size > max_size:
        tail = max_size - keep
        keys = mx.concatenate([keys[..., :keep, :], keys[..., size - tail :, :]], axis=2)
        values = mx.concatenate([values[..., :keep, :], values[..., size - tail :, :]], axis=2)
    arrays = {"keys": mx.contiguous(keys), "values": mx.contiguous(values)}
    return LayerState(ROTATING, arrays, {**meta, "idx": max_size})


def trim_state(state: LayerState, length: int) -> LayerState:
    """The state holding only the first `length` tokens (views of the stored arrays)."""
    if length == state.offset:
        return state
    if length > state.offset or not state.trimmable:
        raise ValueError(f"cannot trim a {state.kind} of {state.offset} tokens to {length}")
    arrays = {k: a[..., :length, :] for k, a in state.arrays.items()}
    meta = dict(state.meta, offset=length)
    if state.kind == ROTATING:
        meta["idx"] = length
    return LayerState(state.kind, arrays, meta)


def to_cache(state: LayerState) -> Any:
    """A new mlx-lm cache object over new array objects (the caller may mutate it freely)."""
    a, m = state.arrays, state.meta
    described = tuple_state.KINDS.get(state.kind)
    if described is not None:
        return tuple_state.build(described, {k: _fresh(v) for k, v in a.items()}, m)
    if state.kind == KV:
        cache = KVCache()
        cache.keys, cache.values = _fresh(a["keys"]), _fresh(a["values"])
    elif state.kind == ROTATING:
        cache = RotatingKVCache(max_size=m["max_size"], keep=m["keep"])
        cache.keys, cache.values = _fresh(a["keys"]), _fresh(a["values"])
        private.set_write_index(cache, m["idx"])
    elif state.kind == QUANTIZED:
        cache = QuantizedKVCache(group_size=m["group_size"], bits=m["bits"])
        n_parts = sum(1 for k in a if k.startswith("keys."))
        cache.keys = tuple(_fresh(a[f"keys.{i}"]) for i in range(n_parts))
        cache.values = tuple(_fresh(a[f"values.{i}"]) for i in range(n_parts))
    elif state.kind == CHUNKED:
        cache = ChunkedKVCache(m["chunk_size"])
        cache.keys, cache.values = _fresh(a["keys"]), _fresh(a["values"])
        cache.start_position = m["start"]
    elif state.kind == ARRAYS:
        cache = ArraysCache(m["parts"])
        cache.cache = [_fresh(a[f"state.{j}"]) for j in range(m["parts"])]
        return cache  # recurrent state keeps no count of its tokens
    else:
        raise UnsupportedCache("unsupported-cache", f"cannot restore {state.kind}")
    cache.offset = m["offset"]
    return cache


# --- the plain numpy form ---


def numpy_views(state: LayerState) -> tuple[dict[str, np.ndarray], list[mx.array]]:
    """Read-only numpy views of the (evaluated) arrays, no copy, and the MLX arrays they view:
    the disk writer reads the views on its own thread while the caller keeps those arrays alive
    (and lets go of them on this thread). bf16 is viewed as its uint16 bits."""
    views: dict[str, np.ndarray] = {}
    owners: list[mx.array] = []
    for name, a in state.arrays.items():
        if a.dtype == mx.bfloat16:
            a = a.view(mx.uint16)
            mx.eval(a)  # a view: no copy
        view = np.asarray(memoryview(a))
        view.flags.writeable = False
        views[name] = view
        owners.append(a)
    return views, owners


def from_numpy(info: LayerInfo, arrays: dict[str, np.ndarray]) -> LayerState:
    """MLX copies of a layer's numpy arrays, as described by `info` (checked by the caller)."""
    out: dict[str, mx.array] = {}
    for name, (_, dtype) in info.arrays.items():
        a = mx.array(arrays[name])
        out[name] = a.view(mx.bfloat16) if dtype == "bfloat16" else a
    return LayerState(info.kind, out, dict(info.meta))


# --- checking a description read from a file ---


def check_info(info: LayerInfo, tokens: int) -> None:
    """Raise ValueError unless `info` is a layer `snapshot` could have made for `tokens`
    tokens: known kind and state, the right array names, single-row arrays of fitting shapes."""
    kind, m = info.kind, info.meta
    described = tuple_state.KINDS.get(kind)
    if kind not in SUPPORTED and described is None:
        raise ValueError(f"unknown cache kind {kind!r}")
    keys = described.meta_keys if described is not None else META_KEYS[kind]
    if set(m) != set(keys) or any(type(v) is not int or v < 0 for v in m.values()):
        raise ValueError(f"bad {kind} state {m}")
    if m["offset"] != tokens:
        raise ValueError(f"the layer holds {m['offset']} tokens, the entry {tokens}")
    if described is not None:
        if not info.arrays or any(d not in STORED_DTYPES for _, d in info.arrays.values()):
            raise ValueError(f"{kind} arrays {info.arrays}")
        tuple_state.check_parts(described, m, {k: s for k, (s, _) in info.arrays.items()})
        return
    if kind == ARRAYS:
        if set(info.arrays) != {f"state.{j}" for j in range(m["parts"])} or m["parts"] < 1:
            raise ValueError(f"{kind} arrays {sorted(info.arrays)}")
        for shape, dtype in info.arrays.values():
            if not shape or shape[0] != 1 or dtype not in STORED_DTYPES:
                raise ValueError(f"{kind} array {shape} {dtype}")
        return
    if kind == QUANTIZED:
        if m["bits"] not in QUANT_BITS or m["group_size"] not in QUANT_GROUP_SIZES:
            raise ValueError(f"bad quantization {m}")
        need = {f"{part}.{i}" for part in ("keys", "values") for i in range(3)}
    else:
        need = {"keys", "values"}
    if set(info.arrays) != need:
        raise ValueError(f"{kind} arrays {sorted(info.arrays)}")
    shapes = [shape for shape, _ in info.arrays.values()]
    if any(len(s) != 4 or s[0] != 1 for s in shapes) or len({s[1:3] for s in shapes}) != 1:
        raise ValueError(f"{kind} array shapes {shapes}")
    if any(dtype not in STORED_DTYPES for _, dtype in info.arrays.values()):
        raise ValueError("unknown dtype")
    length = shapes[0][2]
    if kind == ROTATING:
        if m["offset"] < m["max_size"]:
            ok = length == m["offset"] == m["idx"]
        else:
            ok = m["keep"] <= m["max_size"] and 0 <= m["idx"] <= length <= m["max_size"]
    elif kind == CHUNKED:
        size, start = m["chunk_size"], m["start"]
        ok = size > 0 and start <= (m["offset"] // size) * size and length == m["offset"] - start
    else:
        ok = length == m["offset"]
    if not ok:
        raise ValueError(f"{kind} arrays of length {length} do not fit {m}")
