"""Per-row rollback of mlx-lm batch caches after a verify round.

mlx-lm's `BatchKVCache.trim(n)` trims every row by the same n. After verification each row keeps
a different number of the positions it wrote, so: roll each row right by its surplus beyond the
smallest one (its discarded tail wraps into its left padding, which the mask hides), then trim
every row by the smallest surplus. This is how mlx-lm's own `prepare(right_padding)`/`finalize()`
moves right-padded prompts.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import BatchKVCache, BatchRotatingKVCache

from engine.cache import mlx_lm_private as private
from engine.cache.batch_quantized import BatchQuantizedKVCache
from engine.cache.cache_list import leaves
from engine.cache.position_moves import roll_positions
from engine.cache.ragged import RaggedBatchKVCache
from engine.cache.recurrent import is_recurrent


class RollbackError(RuntimeError):
    pass


def rollback_rows(layers: list[Any], surplus: list[int]) -> None:
    """Drop the last `surplus[i]` positions of row i in every layer's batch cache."""
    smallest = min(surplus)
    shifts = [s - smallest for s in surplus]
    shift = mx.array(shifts) if any(shifts) else None  # one array [B] for every layer
    for layer in leaves(layers):
        if is_recurrent(layer):
            continue  # recurrent state goes back whole (engine/cache/recurrent.py)
        if isinstance(layer, RaggedBatchKVCache):
            layer.rollback(surplus, extra_array=shift)
        elif isinstance(layer, BatchRotatingKVCache):
            _rollback_rotating(layer, shift, smallest)
        elif isinstance(layer, BatchKVCache):
            _rollback_kv(layer, shift, smallest)
        elif isinstance(layer, BatchQuantizedKVCache):
            _rollback_quantized(layer, shift, smallest)
        else:
            raise RollbackError(f"{type(layer).__name__} cannot roll back single rows")


def _shift_rows(cache: Any, shift: mx.array) -> None:
    """Rows rolled right by `shift`: their rolled-out tail is left padding now."""
    cache.left_padding = cache.left_padding + shift
    cache.offset = cache.offset - shift


def _rollback_kv(cache: BatchKVCache, shift: mx.array | None, smallest: int) -> None:
    if shift is not None:
        # the whole buffer, spare capacity included, so the next write needs no reallocation
        cache.keys = roll_positions(cache.keys, shift)
        cache.values = roll_positions(cache.values, shift)
        _shift_rows(cache, shift)
    if smallest:
        cache.trim(smallest)


def _rollback_quantized(
    cache: BatchQuantizedKVCache, shift: mx.array | None, smallest: int
) -> None:
    # the same scheme on all three parts (packed data, scales, biases): the sequence axis is
    # axis 2 for each of them
    if shift is not None:
        cache.roll(shift)
        _shift_rows(cache, shift)
    if smallest:
        cache.trim(smallest)


def _rollback_rotating(cache: BatchRotatingKVCache, shift: mx.array | None, smallest: int) -> None:
    # A multi-token update (`_update_concat`, the target's verify) leaves the buffer in temporal
    # order holding max_size - 1 older positions plus the new ones, so the discarded tail never
    # reaches into what the window must keep. One-token updates rotate the buffer and overwrite
    # old positions for good, so a rotated cache cannot roll back (a sliding-window draft keeps
    # its whole history instead: engine/speculative/draft_model.py).
    if cache.rotated:
        raise RollbackError("a rotated sliding-window cache cannot roll back")
    if shift is not None:
        idx = private.write_index(cache)
        cache.keys = roll_positions(cache.keys[..., :idx, :], shift)
        cache.values = roll_positions(cache.values[..., :idx, :], shift)
        _shift_rows(cache, shift)
    if smallest:
        private.set_write_index(cache, private.write_index(cache) - smallest)
        private.set_rotating_offset(cache, private.rotating_offset(cache) - smallest)
        cache.offset = cache.offset - smallest
    # keep the buffer exactly as long as its content, so the next one-token update rotates
    # from the true oldest position instead of a stale tail
    idx = private.write_index(cache)
    cache.keys = cache.keys[..., :idx, :]
    cache.values = cache.values[..., :idx, :]
