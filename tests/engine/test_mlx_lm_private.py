"""What Tandem relies on in mlx-lm's private attributes (engine/cache/mlx_lm_private.py), checked
against the installed mlx-lm: an upgrade that changes one of these meanings fails here, by name,
instead of somewhere deep inside a batch. And no other engine file touches them."""

from __future__ import annotations

import re
from pathlib import Path

import mlx.core as mx
from mlx_lm.models.cache import (
    BatchKVCache,
    BatchRotatingKVCache,
    KVCache,
    RotatingKVCache,
)

from engine.cache import mlx_lm_private as private

ENGINE = Path(__file__).resolve().parents[2] / "engine"
PRIVATE_NAMES = re.compile(
    r"\._(idx|offset|temporal_order|right_padding|lengths)\b|_get_classes|_BaseCache"
)


def _kv(n: int) -> tuple[mx.array, mx.array]:
    return mx.ones((1, 2, n, 4)), mx.ones((1, 2, n, 4))


def test_write_index_counts_positions_written_into_a_batch_buffer():
    cache = BatchKVCache([2, 0])
    cache.update_and_fetch(mx.ones((2, 2, 3, 4)), mx.ones((2, 2, 3, 4)))
    assert private.write_index(cache) == 3  # left padding included, spare capacity not
    cache.update_and_fetch(mx.ones((2, 2, 1, 4)), mx.ones((2, 2, 1, 4)))
    assert private.write_index(cache) == 4
    assert cache.keys.shape[2] >= 4
    private.set_write_index(cache, 2)
    assert cache.trim(0) == 0 and private.write_index(cache) == 2


def test_right_padding_is_held_between_prepare_and_finalize():
    cache = BatchKVCache([0, 0])
    assert private.right_padding(cache) is None
    cache.prepare(lengths=[3, 1], right_padding=[0, 2])
    assert private.right_padding(cache).tolist() == [0, 2]
    cache.update_and_fetch(mx.ones((2, 2, 3, 4)), mx.ones((2, 2, 3, 4)))
    cache.finalize()
    assert private.right_padding(cache) is None


def test_rotating_temporal_order_unrotates_and_counts_the_buffer():
    cache = BatchRotatingKVCache(4, [0])
    for i in range(6):  # one-token steps rotate the buffer
        cache.update_and_fetch(mx.full((1, 1, 1, 2), float(i)), mx.full((1, 1, 1, 2), float(i)))
    assert cache.rotated and private.write_index(cache) < 4
    assert private.rotating_offset(cache) == 6
    private.rotating_temporal_order(cache)
    assert not cache.rotated and private.write_index(cache) == cache.keys.shape[2]
    assert cache.keys[0, 0, :, 0].tolist() == [2.0, 3.0, 4.0, 5.0]  # oldest first


def test_single_rotating_cache_puts_arrays_in_temporal_order():
    cache = RotatingKVCache(max_size=4)
    for i in range(6):
        cache.update_and_fetch(mx.full((1, 1, 1, 2), float(i)), mx.full((1, 1, 1, 2), float(i)))
    ordered = private.rotating_in_temporal_order(cache, cache.keys)
    assert ordered[0, 0, :, 0].tolist() == [2.0, 3.0, 4.0, 5.0]


def test_model_classes_resolves_mlx_lm_models_with_their_remappings():
    model, args = private.model_classes({"model_type": "llama"})
    assert model.__module__.endswith("models.llama") and args.__name__ == "ModelArgs"
    model, _ = private.model_classes({"model_type": "mistral"})  # remapped to llama
    assert model.__module__.endswith("models.llama")


def test_base_cache_is_the_base_of_mlx_lm_caches():
    assert issubclass(KVCache, private.BaseCache)
    assert hasattr(private.BaseCache, "is_trimmable")


def test_no_other_engine_file_touches_mlx_lm_private_names():
    offenders = []
    for path in ENGINE.rglob("*.py"):
        if path.name == "mlx_lm_private.py":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if PRIVATE_NAMES.search(code):
                offenders.append(f"{path.relative_to(ENGINE.parent)}:{n}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
