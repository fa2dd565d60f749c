"""KV-cache quantization settings and the conversions the engine applies to its caches.

Semantics follow mlx-lm's `maybe_quantize_kv_cache` (kv_bits, kv_group_size, quantized_kv_start):
a cache is converted, whole, once it holds at least `start` positions, checked after every
forward (each prefill chunk, each decode step, each verify round after its rollback). From then
on new keys and values are quantized before attention reads them. Two differences:

- The check also runs before a request's first forward, so `start == 0` means "quantized from
  the first position" (mlx-lm runs its first prefill chunk unquantized even at start 0; hand
  `stream_generate` a list of `QuantizedKVCache` to get this behaviour from mlx-lm). This makes
  the result independent of how a prompt is chunked, batched or restored from the prompt cache.
- The running batch shares one cache object per layer, so a layer is converted for all rows at
  once, when its length (`_idx`: the longest row plus padding) reaches `start`; a row joining a
  quantized layer is quantized as it joins. With one row this is exactly mlx-lm's rule.

Sliding-window layers (RotatingKVCache / BatchRotatingKVCache) stay unquantized, as in mlx-lm.
The draft model's cache stays unquantized (it is small, and only the target's cache decides
which tokens are kept).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from mlx_lm.models.cache import (
    BatchKVCache,
    KVCache,
    QuantizedKVCache,
)

from engine.cache import mlx_lm_private as private
from engine.cache.batch_quantized import BatchQuantizedKVCache
from engine.config import DEFAULT_KV_GROUP_SIZE

log = logging.getLogger(__name__)

KV_BITS = (4, 8)
KV_GROUP_SIZES = (32, 64, 128)


class KVQuantError(ValueError):
    """Invalid KV quantization settings; the message is meant for the user."""


@dataclass(frozen=True)
class KVQuant:
    bits: int
    group_size: int = DEFAULT_KV_GROUP_SIZE
    start: int = 0

    @classmethod
    def from_settings(
        cls, bits: int | None, group_size: int = DEFAULT_KV_GROUP_SIZE, start: int = 0
    ) -> KVQuant | None:
        """The checked settings, or None when `bits` is None (quantization off)."""
        if bits is None:
            return None
        if isinstance(bits, bool) or bits not in KV_BITS:
            raise KVQuantError(f"kv_bits must be 4 or 8 (or None for off), got {bits!r}")
        if isinstance(group_size, bool) or group_size not in KV_GROUP_SIZES:
            raise KVQuantError(f"kv_group_size must be 32, 64 or 128, got {group_size!r}")
        if isinstance(start, bool) or not isinstance(start, int) or start < 0:
            raise KVQuantError(f"kv_start must be a whole number >= 0, got {start!r}")
        return cls(bits, group_size, start)

    @classmethod
    def of(cls, config: Any) -> KVQuant | None:
        """From any config with kv_bits, kv_group_size and kv_start attributes."""
        return cls.from_settings(config.kv_bits, config.kv_group_size, config.kv_start)

    def check_model(self, model: Any) -> None:
        """Refuse a model whose head dims the group size does not divide; log once which
        layers stay unquantized."""
        dims = head_dims(model)
        bad = sorted(d for d in dims if d % self.group_size)
        if bad:
            fits = [str(g) for g in KV_GROUP_SIZES if bad[0] % g == 0]
            advice = (
                f"choose kv_group_size {' or '.join(fits)}"
                if fits
                else "none of 32, 64, 128 divides it: turn KV quantization off"
            )
            raise KVQuantError(
                f"kv_group_size {self.group_size} does not divide this model's attention head "
                f"size {bad[0]}: {advice}"
            )
        kinds = [type(c).__name__ for c in _make_row_cache(model)]
        window = sum(k == "RotatingKVCache" for k in kinds)
        other = sorted({k for k in kinds if k not in ("KVCache", "RotatingKVCache")})
        log.info(
            "KV cache quantization: %d-bit, group %d, from position %d (%d of %d layers)",
            self.bits,
            self.group_size,
            self.start,
            kinds.count("KVCache"),
            len(kinds),
        )
        if window:
            log.info(
                "KV cache quantization: %d sliding-window layers stay unquantized "
                "(mlx-lm does not quantize RotatingKVCache either)",
                window,
            )
        if other:
            log.info("KV cache quantization: %s layers stay unquantized", ", ".join(other))

    def namespace_fields(self) -> dict[str, int]:
        return {"kv_bits": self.bits, "kv_group_size": self.group_size, "kv_start": self.start}


def _make_row_cache(model: Any) -> list[Any]:
    from mlx_lm.models.cache import make_prompt_cache

    return make_prompt_cache(model)


def head_dims(model: Any) -> set[int]:
    """The key/value head sizes of the model's attention layers (from the modules, else from
    the config's head_dim or hidden_size / num_attention_heads)."""
    dims: set[int] = set()
    for layer in getattr(model, "layers", None) or []:
        attn = getattr(layer, "self_attn", None) or getattr(layer, "attention", None)
        for name in ("head_dim", "k_head_dim", "v_head_dim"):
            d = getattr(attn, name, None)
            if isinstance(d, int) and d > 0:
                dims.add(d)
    if not dims:
        args = getattr(model, "args", None)
        d = getattr(args, "head_dim", None)
        if not d and getattr(args, "num_attention_heads", None):
            d = args.hidden_size // args.num_attention_heads
        if d:
            dims.add(int(d))
    return dims


# -- single-row caches (prefill) ---------------------------------------------------------------


def quantize_row_cache(row_cache: list[Any] | None, kv: KVQuant | None) -> None:
    """Convert (in place) the KVCache layers holding at least `kv.start` positions."""
    if kv is None or row_cache is None:
        return
    for i, c in enumerate(row_cache):
        if type(c) is KVCache and c.offset >= kv.start:
            row_cache[i] = c.to_quantized(group_size=kv.group_size, bits=kv.bits)


def cache_signature(row_cache: list[Any]) -> tuple[str, ...]:
    """Rows whose caches have the same signature can share one batched forward."""
    return tuple(type(c).__name__ for c in row_cache)


# -- batch caches (the running batch, batched prefill) -----------------------------------------


def merge_layer(caches: list[Any]) -> Any:
    """Single-row caches of one layer as one batch cache (left padding): mlx-lm's `merge`,
    extended to QuantizedKVCache rows (a mix with KVCache rows is quantized)."""
    if any(isinstance(c, QuantizedKVCache) for c in caches):
        return BatchQuantizedKVCache.merge(caches)
    return caches[0].merge(caches)


def extend_layer(mine: Any, theirs: Any) -> Any:
    """`mine.extend(theirs)`; a plain layer joined by quantized rows is quantized first.
    Returns the layer to keep (a new object when it was converted)."""
    if isinstance(theirs, BatchQuantizedKVCache) and _plain_batch(mine):
        mine = BatchQuantizedKVCache.from_batch(mine, theirs.group_size, theirs.bits)
    mine.extend(theirs)
    return mine


def quantize_batch_cache(layers: list[Any] | None, kv: KVQuant | None) -> int:
    """Convert (in place) the plain batch layers holding at least `kv.start` positions.
    Returns how many layers were converted."""
    if kv is None or not layers:
        return 0
    converted = 0
    for i, c in enumerate(layers):
        if _plain_batch(c) and private.write_index(c) >= kv.start:
            layers[i] = BatchQuantizedKVCache.from_batch(c, kv.group_size, kv.bits)
            converted += 1
    return converted


def _plain_batch(c: Any) -> bool:
    """An unquantized, non-sliding batch layer: BatchKVCache or a subclass (e.g. ragged)."""
    return isinstance(c, BatchKVCache)
