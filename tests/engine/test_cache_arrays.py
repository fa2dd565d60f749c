"""`cache_arrays` (engine/cache/cache_list.py): every array of a batch cache, which a verify
round's rollback evaluates on its own, for attention and recurrent layers alike."""

from __future__ import annotations

import mlx.core as mx
from mlx_lm.utils import load

from engine.cache.batch_rows import merge_row_caches
from engine.cache.cache_list import cache_arrays, leaves
from tests.tiny_models import make_tiny_qwen3_next_dir, prefill


def test_every_array_of_a_hybrid_batch_cache(tmp_path):
    model, _ = load(str(make_tiny_qwen3_next_dir(tmp_path)))
    cache = merge_row_caches([prefill(model, [1, 2, 3]), prefill(model, [1, 4])])
    arrays = cache_arrays(cache)
    ids = {id(a) for a in arrays}
    for layer in leaves(cache):
        if hasattr(layer, "keys") and layer.keys is not None:
            assert id(layer.keys) in ids and id(layer.values) in ids and id(layer.offset) in ids
        else:
            assert all(id(a) in ids for a in layer.cache if a is not None)
    mx.eval(arrays)
