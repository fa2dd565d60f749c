"""Attention for a prompt chunk at an offset on CUDA: MLX's unfused path, not a cuDNN graph per step.

MLX's CUDA backend runs attention over several queries through cuDNN, and keys each cuDNN graph
by the exact shapes of the queries and the keys; a graph not seen before is built first. A prompt
prefilled in chunks beside running chats (engine/core/prefill_pacer.py), or the new turn of a chat
whose start came from the prompt cache, meets a key length it has never met at every step, so
every such step built a graph: on an H100 a random 8B's steps with 16-token chunks took 35 ms
against 15 for a decode step, and a 128-token chunk at 1,920 keys 83 ms against 51 for 1,024
tokens at a shape seen before (docs/benchmarks.md, twelfth pass). Here such calls take the
computation MLX itself falls back to (mlx/fast.cpp: scores by matmul, the mask, a precise softmax,
a matmul), which builds nothing; the scores it holds are bounded (DEFAULT_MAX_SCORES), and a
chunk starting a prompt (as many keys as queries: its shape recurs) keeps cuDNN.

The routing lives in verify_attention_cuda's drop-in `scaled_dot_product_attention`; set
TANDEM_NO_CHUNK_ATTENTION=1 to keep cuDNN for these calls.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx

DISABLE_ENV = "TANDEM_NO_CHUNK_ATTENTION"
# fewer queries than this stay with MLX: on an H100 one row's forward over 4-8 tokens cost the
# same at a new key length as at a seen one (no build to save), and verify forwards are this small
DEFAULT_MIN_QUERIES = 16
# B * Hq * N * L scores at most (in the inputs' dtype, 128 MiB at bfloat16): a longer chunk
# deeper into a long context is worth a graph build, and would hold too much memory here
DEFAULT_MAX_SCORES = 1 << 26
HALF_FLOATS = (mx.float16, mx.bfloat16)  # what cuDNN takes (MLX runs float32 unfused anyway)


def takes(q: mx.array, k: mx.array, v: mx.array, mask: Any, sinks: Any = None) -> bool:
    """Whether this call is a chunk at an offset that cuDNN would build a graph for."""
    if sinks is not None or q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        return False
    B, Hq, N, D = q.shape
    Hk, L = k.shape[1], k.shape[2]
    if N < DEFAULT_MIN_QUERIES or L <= N or B * Hq * N * L > DEFAULT_MAX_SCORES:
        return False
    if Hk == 0 or Hq % Hk or q.dtype not in HALF_FLOATS:
        return False
    if isinstance(mask, str):
        return mask == "causal"
    return isinstance(mask, mx.array) and mask.dtype == mx.bool_ and mask.ndim == 4


def unfused_attention(
    q: mx.array, k: mx.array, v: mx.array, *, scale: float, mask: str | mx.array
) -> mx.array:
    """softmax(q k^T * scale, masked) v as MLX computes it where it has no fused kernel."""
    B, Hq, N, D = q.shape
    Hk, L = k.shape[1], k.shape[2]
    repeats = Hq // Hk
    q = mx.array(scale, q.dtype) * q
    if repeats > 1:
        q = q.reshape(B, Hk, repeats, N, D)
        k, v = k[:, :, None], v[:, :, None]
    scores = q @ k.swapaxes(-1, -2)
    if isinstance(mask, str):  # "causal": the chunk's queries are the last N positions
        mask = mx.arange(L - N, L)[:, None] >= mx.arange(L)[None]
    elif repeats > 1:
        mask = (
            mask[:, :, None]
            if mask.shape[1] == 1
            else mask.reshape(mask.shape[0], Hk, repeats, N, L)
        )
    scores = mx.where(mask, scores, mx.array(mx.finfo(scores.dtype).min, scores.dtype))
    out = mx.softmax(scores, axis=-1, precise=True) @ v
    return out.reshape(B, Hq, N, -1) if repeats > 1 else out
