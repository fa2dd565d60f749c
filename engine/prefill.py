"""Prompt processing: chunks of several waiting prompts in one forward.

A prompt alone is processed exactly as `mlx_lm.generate` does. Several prompts share one
forward the way mlx-lm's BatchGenerator does it: their single-row caches merge into a batch
cache (left padding), the chunks are right-padded, and `prepare`/`finalize` roll the padding out
of the way; each row then gets its own cache back (`extract`). One weight read serves every
prompt, which is what prompt processing on a memory-bound CPU needs.

With KV quantization (`kv`), a row's cache is quantized once it holds `kv.start` positions,
checked before the first chunk and after every chunk (engine/cache/kv_quant.py); rows share a
forward only with rows whose caches have the same layer types (all quantized, or none).
"""

from __future__ import annotations

import logging
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache

from engine.cache.kv_quant import KVQuant, cache_signature, merge_layer, quantize_row_cache
from engine.request_state import RequestState

log = logging.getLogger(__name__)


def plan_chunks(
    prefilling: list[RequestState], budget: int, max_rows: int
) -> list[tuple[RequestState, int]]:
    """(request, tokens to process now) for the oldest requests, within the token budget.
    A request with nothing left to process gets 0 (it is ready to join the batch)."""
    group = []
    for state in prefilling:
        if len(group) >= max_rows:
            break
        todo = len(state.prompt) - 1 - state.prefilled
        if todo <= 0:
            group.append((state, 0))
            continue
        if budget <= 0:
            break
        n = min(todo, budget)
        group.append((state, n))
        budget -= n
    return group


def ensure_caches(
    state: RequestState, model: Any, draft: Any | None, kv: KVQuant | None = None
) -> None:
    if state.cache is None:
        state.cache = make_prompt_cache(model)
        state.draft_cache = draft.new_row_cache() if draft is not None else None
    quantize_row_cache(state.cache, kv)  # start 0: quantized from the first position


def prefill_alone(
    state: RequestState, n: int, model: Any, draft: Any | None, kv: KVQuant | None = None
) -> None:
    chunk = mx.array(state.prompt[state.prefilled : state.prefilled + n])[None]
    model(chunk, cache=state.cache)
    quantize_row_cache(state.cache, kv)
    mx.eval([c.state for c in state.cache])
    if draft is not None:
        draft.prefill(state.draft_cache, chunk)
    state.prefilled += n


def prefill_together(
    group: list[tuple[RequestState, int]], model: Any, draft: Any | None, kv: KVQuant | None = None
) -> list[tuple[RequestState, int]]:
    """One forward over the chunks of the requests whose caches have the same layer types
    (each such set in its own forward). Returns the requests left for the caller to process
    alone: those with no partner, and those of a batched forward that failed."""
    parts: dict[tuple[str, ...], list[tuple[RequestState, int]]] = {}
    for state, n in group:
        parts.setdefault(cache_signature(state.cache), []).append((state, n))
    left = []
    for part in parts.values():
        if len(part) == 1:
            left += part
            continue
        try:
            _prefill_padded(part, model, draft, kv)
        except Exception:  # noqa: BLE001 - the caller retries them alone
            log.exception("batched prefill failed; retrying the prompts one by one")
            left += part
    return left


def _prefill_padded(group, model, draft, kv):
    chunks = [s.prompt[s.prefilled : s.prefilled + n] for s, n in group]
    lengths = [len(c) for c in chunks]
    width = max(lengths)
    padding = [width - n for n in lengths]
    tokens = mx.array([c + [0] * (width - len(c)) for c in chunks], dtype=mx.uint32)
    _run_padded(model, tokens, [s.cache for s, _ in group], lengths, padding, kv)
    if draft is not None:
        _run_padded(draft.model, tokens, [s.draft_cache for s, _ in group], lengths, padding)
    for state, n in group:
        state.prefilled += n


def _run_padded(model, tokens, row_caches, lengths, padding, kv=None):
    layers = [merge_layer([c[i] for c in row_caches]) for i in range(len(row_caches[0]))]
    for layer in layers:
        layer.prepare(lengths=lengths, right_padding=padding)
    model(tokens, cache=layers)
    for layer in layers:
        layer.finalize()
    mx.eval([(layer.keys, layer.values) for layer in layers])
    for row, caches in enumerate(row_caches):
        caches[:] = [layer.extract(row) for layer in layers]
        quantize_row_cache(caches, kv)
