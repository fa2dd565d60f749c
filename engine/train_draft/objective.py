"""The head's training objective, unrolled over draft depth ("training-time test"): pass d
feeds the head its own pass d-1 predictions, attending to true-feature keys up to the chain's
anchor and to its own earlier passes beyond it, exactly as a k-token chain does at run time."""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
import mlx.nn as nn

from engine.speculative.eagle_head import EagleHead

DEFAULT_PASS_WEIGHTS = (1.0, 0.8, 0.6)
DEFAULT_REG_WEIGHT = 0.5
_NEG = -1e9


@dataclass
class Batch:
    """Inputs for entries i = 0..L-1: the target's hidden state at i, the embedding of token
    i+1; targets: the hidden state at i+1 and the target's greedy token there (a draft id or
    -1); `mask` marks real entries, `reply` those inside the reply."""

    feats: mx.array  # [B, L, d]
    embeds: mx.array  # [B, L, d]
    target_feats: mx.array  # [B, L, d]
    labels: mx.array  # [B, L] int32
    mask: mx.array  # [B, L] bool
    reply: mx.array  # [B, L] bool


def _shift(x: mx.array, s: int) -> mx.array:
    """x at position i - s along axis 2 (zeros before the start)."""
    if s == 0:
        return x
    pad = mx.zeros((*x.shape[:2], s, *x.shape[3:]), dtype=x.dtype)
    return mx.concatenate([pad, x[:, :, :-s]], axis=2)


def _attention(q: mx.array, ks: list[mx.array], vs: list[mx.array], scale: float) -> mx.array:
    """Pass d = len(ks): position i sees pass-1 keys j <= i-d+1 and pass e's key at i-d+e."""
    d, L = len(ks), q.shape[2]
    q = q * scale
    scores = q @ ks[0].swapaxes(-1, -2)
    i, j = mx.arange(L)[:, None], mx.arange(L)[None]
    scores = mx.where(j <= i - (d - 1), scores, _NEG)
    diag = [(q * _shift(ks[e], d - 1 - e)).sum(-1, keepdims=True) for e in range(1, d)]
    probs = mx.softmax(mx.concatenate([scores, *diag], axis=-1), axis=-1, precise=True)
    out = probs[..., :L] @ vs[0]
    for e in range(1, d):
        out = out + probs[..., L + e - 1 : L + e] * _shift(vs[e], d - 1 - e)
    return out


def _pass(head: EagleHead, feats: mx.array, embeds: mx.array, ks: list, vs: list) -> mx.array:
    layer, attn = head.layer, head.layer.self_attn
    x = head.fuse(feats, embeds)
    B, L, _ = x.shape
    xn = layer.input_layernorm(x)
    q = attn.q_proj(xn).reshape(B, L, attn.n_heads, -1).transpose(0, 2, 1, 3)
    k = attn.k_proj(xn).reshape(B, L, attn.n_kv_heads, -1).transpose(0, 2, 1, 3)
    v = attn.v_proj(xn).reshape(B, L, attn.n_kv_heads, -1).transpose(0, 2, 1, 3)
    q, k = attn.rope(q), attn.rope(k)
    repeats = attn.n_heads // attn.n_kv_heads
    ks.append(mx.repeat(k, repeats, axis=1) if repeats > 1 else k)
    vs.append(mx.repeat(v, repeats, axis=1) if repeats > 1 else v)
    o = _attention(q, ks, vs, attn.scale).transpose(0, 2, 1, 3).reshape(B, L, -1)
    h = x + attn.o_proj(o)
    h = h + layer.mlp(layer.post_attention_layernorm(h))
    return head.norm(h)


def unrolled(head: EagleHead, batch: Batch, depth: int) -> list[mx.array]:
    """The head's outputs for passes 1..depth; pass d at entry i is chain step d anchored at
    entry i-d+1 (valid for i >= d-1)."""
    ks: list[mx.array] = []
    vs: list[mx.array] = []
    outs: list[mx.array] = []
    feats = batch.feats
    for d in range(depth):
        if d > 0:
            prev = outs[-1]
            feats = mx.concatenate([mx.zeros_like(prev[:, :1]), prev[:, :-1]], axis=1)
        outs.append(_pass(head, feats, batch.embeds, ks, vs))
    return outs


def loss(
    head: EagleHead,
    batch: Batch,
    draft_head: mx.array,
    *,
    pass_weights: tuple[float, ...] = DEFAULT_PASS_WEIGHTS,
    reg_weight: float = DEFAULT_REG_WEIGHT,
) -> tuple[mx.array, tuple[mx.array, mx.array]]:
    """Weighted cross-entropy (greedy target token, draft vocabulary) + smooth-L1 on the hidden
    state, summed over passes; returns (loss, (ce of pass 1, reg of pass 1))."""
    outs = unrolled(head, batch, len(pass_weights))
    positions = mx.arange(batch.mask.shape[1])[None]
    total = mx.array(0.0)
    first: tuple[mx.array, mx.array] = (total, total)
    for d, (out, weight) in enumerate(zip(outs, pass_weights)):
        valid = batch.mask & (positions >= d)
        with_label = valid & (batch.labels >= 0)
        logits = (out @ draft_head.T).astype(mx.float32)
        ce = nn.losses.cross_entropy(logits, mx.maximum(batch.labels, 0))
        ce = (ce * with_label).sum() / mx.maximum(with_label.sum(), 1)
        reg = nn.losses.smooth_l1_loss(out, batch.target_feats, reduction="none").mean(-1)
        reg = (reg * valid).sum() / mx.maximum(valid.sum(), 1)
        total = total + weight * (ce + reg_weight * reg)
        if d == 0:
            first = (ce, reg)
    return total, first


def accuracy(head: EagleHead, batch: Batch, draft_head: mx.array, depth: int) -> dict:
    """Held-out numbers over reply anchors: top-1 of each chain step, and the mean acceptance
    length of a `depth`-token greedy chain (accepted drafts + the target's own token)."""
    outs = unrolled(head, batch, depth)
    hits = [(mx.argmax(out @ draft_head.T, axis=-1) == batch.labels) for out in outs]

    anchors = batch.reply & batch.mask
    step_hits, running, accept = [], mx.ones(anchors.shape, dtype=mx.bool_), mx.ones(anchors.shape)
    for d, hit in enumerate(hits):
        # pass d at entry a+d judges chain step d+1 from anchor a
        shifted = mx.concatenate([hit[:, d:], mx.zeros((hit.shape[0], d), dtype=mx.bool_)], 1)
        real = mx.concatenate([batch.mask[:, d:], mx.zeros((hit.shape[0], d), dtype=mx.bool_)], 1)
        step_hits.append((shifted & anchors & real).sum() / mx.maximum((anchors & real).sum(), 1))
        running = running & shifted & real
        accept = accept + running
    n = mx.maximum(anchors.sum(), 1)
    mean_accept = (accept * anchors).sum() / n
    mx.eval(mean_accept, *step_hits)
    return {
        "top1_by_step": [float(h) for h in step_hits],
        "accept_len": float(mean_accept),
        "anchors": int(anchors.sum()),
    }
