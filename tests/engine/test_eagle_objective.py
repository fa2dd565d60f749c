"""The training objective's unrolled passes equal what the head computes at run time: pass 1
is the head over true features; pass d is step d of a chain through the head's KV cache."""

import mlx.core as mx
from mlx_lm.models.cache import KVCache

from engine.speculative.eagle_head import EagleHead, HeadConfig
from engine.train_draft import objective


def _head() -> EagleHead:
    mx.random.seed(3)
    config = HeadConfig(
        hidden_size=32,
        intermediate_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        max_position_embeddings=256,
        vocab_size=50,
        draft_vocab_size=50,
    )
    head = EagleHead(config)
    mx.eval(head.parameters())
    return head


def test_unrolled_passes_match_a_cached_chain():
    head = _head()
    B, L, d = 1, 9, 32
    feats = mx.random.normal((B, L, d))
    embeds = mx.random.normal((B, L, d))
    batch = objective.Batch(
        feats=feats,
        embeds=embeds,
        target_feats=feats,
        labels=mx.zeros((B, L), dtype=mx.int32),
        mask=mx.ones((B, L), dtype=mx.bool_),
        reply=mx.ones((B, L), dtype=mx.bool_),
    )
    outs = objective.unrolled(head, batch, 3)
    assert mx.allclose(outs[0], head(embeds, feats)[0], atol=1e-4)
    for anchor in (2, 5):
        cache = KVCache()
        out = head(embeds[:, : anchor + 1], feats[:, : anchor + 1], cache)[0][:, -1:]
        assert mx.allclose(out, outs[0][:, anchor : anchor + 1], atol=1e-4)
        for step in (1, 2):
            i = anchor + step
            out = head(embeds[:, i : i + 1], out, cache)[0]
            assert mx.allclose(out, outs[step][:, i : i + 1], atol=1e-4), (anchor, step)
