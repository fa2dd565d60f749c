"""Single-row caches into the batched caches the running batch and the draft model decode over."""

from __future__ import annotations

from typing import Any

from engine.cache.kv_quant import merge_layer
from engine.cache.ragged import as_ragged


def merge_row_cache(row_cache: list[Any]) -> list[Any]:
    """A single request's per-layer caches as batch caches of one row (mlx-lm's `merge`),
    with rows that can give back positions without moving data (`RaggedBatchKVCache`)."""
    return as_ragged([merge_layer([layer]) for layer in row_cache])


def merge_row_caches(row_caches: list[list[Any]]) -> list[Any]:
    """Several requests' per-layer caches as batch caches of those rows, in order (left
    padding to the longest, mlx-lm's `merge`), ragged as in `merge_row_cache`."""
    return as_ragged([merge_layer(list(layer)) for layer in zip(*row_caches)])
