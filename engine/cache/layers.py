"""One layer's KV cache as a stored value.

`snapshot` copies an mlx-lm single-row cache into a `LayerState` (compact arrays plus the small
integer state), `trim_state` cuts a state down to fewer tokens, `to_cache` builds a fresh mlx-lm
cache object from a state, and `to_numpy` / `from_numpy` give the plain form the disk tier writes.

Supported: KVCache, RotatingKVCache (sliding window) and QuantizedKVCache. Anything else
(ArraysCache, CacheList, ChunkedKVCache, batch caches) raises `UnsupportedCache`.

Every function here touches MLX: call them on the engine's MLX thread only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import numpy as np
from mlx_lm.models.cache import KVCache, QuantizedKVCache, RotatingKVCache

KV = "KVCache"
ROTATING = "RotatingKVCache"
QUANTIZED = "QuantizedKVCache"
SUPPORTED = (KV, ROTATING, QUANTIZED)
_CLASSES = {KV: KVCache, ROTATING: RotatingKVCache, QUANTIZED: QuantizedKVCache}


class UnsupportedCache(Exception):
    """This cache cannot be stored; `reason` is the stats key it is counted under."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(detail or reason)
        self.reason = reason


@dataclass
class LayerState:
    kind: str  # the mlx-lm class name
    arrays: dict[str, mx.array]  # "keys"/"values", or "keys.0".."values.2" when quantized
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


def layer_trimmable(kind: str, meta: dict[str, int]) -> bool:
    """Can this layer be cut down to fewer tokens? A sliding window only while it never wrapped."""
    if kind == ROTATING:
        return meta["offset"] < meta["max_size"]
    return True


def _fresh(a: mx.array) -> mx.array:
    return a[...]  # a new array object: in-place updates on it never reach the stored one


def _compact(a: mx.array, n: int) -> mx.array:
    """The first n positions (axis 2) as their own buffer, not a view pinning a larger one."""
    if a.shape[2] != n:
        a = a[..., :n, :]
    return mx.contiguous(a)


def snapshot(cache: Any) -> LayerState:
    """Copy one layer's cache into a compact, independent LayerState (arrays evaluated)."""
    kind = type(cache).__name__
    if kind not in SUPPORTED or type(cache) is not _CLASSES[kind]:
        raise UnsupportedCache("unsupported-cache", f"cannot store {kind}")
    n = int(cache.offset)
    if cache.keys is None:
        raise UnsupportedCache("empty-cache", f"{kind} holds no arrays")
    if kind == KV:
        state = LayerState(
            kind,
            {"keys": _compact(cache.keys, n), "values": _compact(cache.values, n)},
            {"offset": n},
        )
    elif kind == QUANTIZED:
        arrays = {f"keys.{i}": _compact(a, n) for i, a in enumerate(cache.keys)}
        arrays.update({f"values.{i}": _compact(a, n) for i, a in enumerate(cache.values)})
        meta = {"offset": n, "group_size": int(cache.group_size), "bits": int(cache.bits)}
        state = LayerState(kind, arrays, meta)
    else:
        state = _snapshot_rotating(cache)
    mx.eval(list(state.arrays.values()))
    return state


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
    keys, values = cache._temporal_order(keys), cache._temporal_order(values)
    size = keys.shape[2]
    if size < max_size:  # not a shape mlx-lm produces; store it untouched
        arrays = {"keys": mx.contiguous(cache.keys), "values": mx.contiguous(cache.values)}
        return LayerState(ROTATING, arrays, {**meta, "idx": int(cache._idx)})
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
    if state.kind == KV:
        cache = KVCache()
        cache.keys, cache.values = _fresh(a["keys"]), _fresh(a["values"])
    elif state.kind == ROTATING:
        cache = RotatingKVCache(max_size=m["max_size"], keep=m["keep"])
        cache.keys, cache.values = _fresh(a["keys"]), _fresh(a["values"])
        cache._idx = m["idx"]
    elif state.kind == QUANTIZED:
        cache = QuantizedKVCache(group_size=m["group_size"], bits=m["bits"])
        n_parts = sum(1 for k in a if k.startswith("keys."))
        cache.keys = tuple(_fresh(a[f"keys.{i}"]) for i in range(n_parts))
        cache.values = tuple(_fresh(a[f"values.{i}"]) for i in range(n_parts))
    else:
        raise UnsupportedCache("unsupported-cache", f"cannot restore {state.kind}")
    cache.offset = m["offset"]
    return cache


# --- the plain numpy form (bf16 travels as its uint16 bits) ---


def _dtype_name(dtype: mx.Dtype) -> str:
    return str(dtype).rsplit(".", 1)[-1]


def to_numpy(state: LayerState) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """numpy copies of the arrays, and JSON-ready metadata: kind, meta and each array's dtype."""
    arrays: dict[str, np.ndarray] = {}
    dtypes: dict[str, str] = {}
    for name, a in state.arrays.items():
        dtypes[name] = _dtype_name(a.dtype)
        arrays[name] = np.array(a.view(mx.uint16) if a.dtype == mx.bfloat16 else a)
    return arrays, {"kind": state.kind, "meta": dict(state.meta), "dtypes": dtypes}


def from_numpy(arrays: dict[str, np.ndarray], info: dict[str, Any]) -> LayerState:
    """The inverse of `to_numpy`; raises ValueError when the pieces do not fit together."""
    kind, meta, dtypes = info["kind"], info["meta"], info["dtypes"]
    if kind not in SUPPORTED:
        raise ValueError(f"unknown cache kind {kind!r}")
    meta = {k: int(v) for k, v in meta.items()}
    if set(arrays) != set(dtypes):
        raise ValueError("array names do not match the metadata")
    out: dict[str, mx.array] = {}
    for name, arr in arrays.items():
        dtype = getattr(mx, dtypes[name], None)
        if not isinstance(dtype, mx.Dtype):
            raise ValueError(f"unknown dtype {dtypes[name]!r}")
        a = mx.array(arr)
        if dtype == mx.bfloat16:
            a = a.view(mx.bfloat16)
        if a.dtype != dtype or a.ndim != 4:
            raise ValueError(f"array {name} has dtype {a.dtype} / {a.ndim} dims")
        out[name] = a
    state = LayerState(kind, out, meta)
    _check_shapes(state)
    return state


def _check_shapes(state: LayerState) -> None:
    lengths = {a.shape[2] for a in state.arrays.values()}
    need = {"keys", "values"} if state.kind != QUANTIZED else {"keys.0", "values.0"}
    if not need <= set(state.arrays) or len(lengths) != 1:
        raise ValueError("inconsistent arrays")
    (length,) = lengths
    m = state.meta
    if state.kind == ROTATING:
        ok = (m["offset"] < m["max_size"] and length == m["offset"] == m["idx"]) or (
            m["offset"] >= m["max_size"] and 0 <= m["idx"] <= length
        )
    else:
        ok = length == m["offset"]
    if not ok:
        raise ValueError(f"{state.kind} arrays of length {length} do not fit {m}")
