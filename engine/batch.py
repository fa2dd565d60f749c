"""The running batch: rows that decode together over one batched KV cache.

Plain decoding is pipelined as in mlx-lm's GenerationBatch: the forward for step n+1 is queued
(`mx.async_eval`) before the tokens of step n are read back, so Python overhead overlaps compute.

With KV quantization (`kv`), layers whose cache reaches `kv.start` positions are converted to
BatchQuantizedKVCache after a row joins, after each decode step and after each verify round's
rollback (engine/cache/kv_quant.py); the draft model's cache stays unquantized.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import mlx.core as mx

from engine.cache.kv_quant import KVQuant, extend_layer, merge_layer, quantize_batch_cache
from engine.cache.ragged import as_ragged
from engine.request_state import RequestState
from engine.sampling import sample_positions, sample_rows
from engine.speculative.rollback import rollback_rows


def merge_row_cache(row_cache: list[Any]) -> list[Any]:
    """A single request's per-layer caches as batch caches of one row (mlx-lm's `merge`),
    with rows that can give back positions without moving data (`RaggedBatchKVCache`)."""
    return as_ragged([merge_layer([layer]) for layer in row_cache])


@dataclass
class Verify:
    """A verify forward in flight (DecodeBatch.verify_launch)."""

    x: mx.array  # [B, width + 1] inputs: pending tokens and drafts
    logits: mx.array
    drafts: list[list[int]]
    draft_k: list[int]


class DecodeBatch:
    def __init__(self, model: Any, kv: KVQuant | None = None) -> None:
        self.model = model
        self.kv = kv  # KV cache quantization settings, None: off
        self.draft: Any | None = None  # DraftModelDrafter: keeps its cache in step with ours
        self.rows: list[RequestState] = []
        self.cache: list[Any] | None = None
        self.inputs: mx.array | None = None  # [B] next input tokens, possibly not yet evaluated
        self.input_is_sampled: list[bool] = []  # True: the pending input is a new token to emit
        self._width = 0  # draft width of the last verify round
        self.last_draft_s = 0.0  # time the draft model spent in the last verify round
        self.last_sample_s = 0.0  # time picking the target's tokens in the last verify round
        self.last_wait_s = 0.0  # time waiting for the last verify forward once it was queued

    def __len__(self) -> int:
        return len(self.rows)

    def add(
        self,
        state: RequestState,
        row_cache: list[Any],
        last_prompt_token: int,
        draft_row_cache: list[Any] | None = None,
    ) -> None:
        if self.draft is not None:
            self.draft.join(draft_row_cache)
        batch_cache = merge_row_cache(row_cache)
        if self.cache is None or not self.rows:
            self.cache = batch_cache
        else:
            self.cache = [extend_layer(m, t) for m, t in zip(self.cache, batch_cache)]
        quantize_batch_cache(self.cache, self.kv)
        token = mx.array([last_prompt_token], dtype=mx.uint32)
        self.inputs = token if self.inputs is None else mx.concatenate([self.inputs, token])
        self.rows.append(state)
        self.input_is_sampled.append(False)

    def keep(self, indices: list[int]) -> None:
        """Keep only these rows (in this order)."""
        if len(indices) == len(self.rows):
            return
        if self.draft is not None:
            self.draft.keep(indices)
        if not indices:
            self.rows, self.cache, self.inputs, self.input_is_sampled = [], None, None, []
            return
        self.rows = [self.rows[i] for i in indices]
        self.input_is_sampled = [self.input_is_sampled[i] for i in indices]
        assert self.inputs is not None and self.cache is not None
        self.inputs = self.inputs[mx.array(indices)]
        for layer in self.cache:
            layer.filter(indices)

    def extract(self, state: RequestState) -> tuple[list[Any], list[Any] | None]:
        """Single-row copies of one row's target and draft caches (for the prefix cache)."""
        i = next(i for i, row in enumerate(self.rows) if row is state)
        target = [layer.extract(i) for layer in self.cache]
        draft = None
        if self.draft is not None:
            self.draft.sync()
            draft = [layer.extract(i) for layer in self.draft.cache]
        return target, draft

    def remove(self, states: list[RequestState]) -> None:
        gone = {id(s) for s in states}
        self.keep([i for i, row in enumerate(self.rows) if id(row) not in gone])

    def step(self) -> list[tuple[RequestState, int]]:
        """One pipelined decode step; returns the (row, token) pairs that became known."""
        assert self.inputs is not None
        inputs = self.inputs
        contexts = [self._context(i, inputs) for i in range(len(self.rows))]
        logits = self.model(inputs[:, None], cache=self.cache)[:, -1, :]
        quantize_batch_cache(self.cache, self.kv)
        # the token sampled now follows the pending input when that is a new token too
        positions = [len(r.generated) + fresh for r, fresh in zip(self.rows, self.input_is_sampled)]
        sampled = sample_rows(logits, [r.sampler for r in self.rows], contexts, positions)
        if self.draft is not None:
            self.draft.consume(inputs)
            mx.async_eval(sampled, [(c.keys, c.values) for c in self.draft.cache])
        else:
            mx.async_eval(sampled)
        known = inputs.tolist()
        out = [
            (row, token)
            for row, token, fresh in zip(self.rows, known, self.input_is_sampled)
            if fresh
        ]
        self.inputs = sampled
        self.input_is_sampled = [True] * len(self.rows)
        return out

    def _context(self, i: int, inputs: mx.array) -> mx.array | None:
        row = self.rows[i]
        if not row.sampler.uses_context:
            return None
        tail = mx.array(row.history[-row.sampler.params.repetition_context :], dtype=mx.uint32)
        if self.input_is_sampled[i]:
            tail = mx.concatenate([tail, inputs[i : i + 1]])
        return tail

    # -- speculative rounds: drafting needs the last tokens, so only host work overlaps -------

    def flush(self) -> list[tuple[RequestState, int]]:
        """Read back pending sampled inputs; returns the (row, token) pairs to emit."""
        if not any(self.input_is_sampled):
            return []
        assert self.inputs is not None
        known = self.inputs.tolist()
        out = [(r, t) for r, t, fresh in zip(self.rows, known, self.input_is_sampled) if fresh]
        self.input_is_sampled = [False] * len(self.rows)
        return out

    def verify_launch(self, drafts: list[list[int]], draft_k: list[int] | None = None) -> Verify:
        """Queue one target forward over [B, width+1]: each row's pending input and its draft,
        and return at once so host work can overlap it.

        Rows with `draft_k[i] > 0` are drafted here by the draft model (k tokens); the others
        bring `drafts[i]`. `verify_collect` waits for the forward and returns (the drafts used,
        the target tokens at positions 0..len(draft)); the caller decides how many were accepted
        and calls `rollback`."""
        assert self.inputs is not None and not any(self.input_is_sampled)
        draft_k = draft_k or [0] * len(drafts)
        width = max(max(len(d) for d in drafts), max(draft_k))
        self.last_draft_s = 0.0
        if self.draft is not None:
            start = time.perf_counter()
            use = [k > 0 for k in draft_k]
            x = self.draft.draft_columns(self.inputs, drafts, use, width)
            mx.eval(x)
            self.last_draft_s = time.perf_counter() - start
        else:
            firsts = self.inputs.tolist()
            x = mx.array(
                [[t] + d + [0] * (width - len(d)) for t, d in zip(firsts, drafts)],
                dtype=mx.uint32,
            )
        logits = self.model(x, cache=self.cache)
        mx.async_eval(logits)
        self._width = width
        return Verify(x=x, logits=logits, drafts=drafts, draft_k=draft_k)

    def verify_collect(self, pending: Verify) -> tuple[list[list[int]], list[list[int]]]:
        start = time.perf_counter()
        mx.eval(pending.logits)
        self.last_wait_s = time.perf_counter() - start
        sampling_start = time.perf_counter()
        columns = pending.x.tolist()
        drafts = [
            row[1 : 1 + k] if k > 0 else d
            for row, k, d in zip(columns, pending.draft_k, pending.drafts)
        ]
        contexts = [self._verify_contexts(row, d) for row, d in zip(self.rows, drafts)]
        lengths = [len(d) + 1 for d in drafts]
        positions = [len(r.generated) for r in self.rows]
        targets = sample_positions(
            pending.logits, [r.sampler for r in self.rows], contexts, lengths, positions
        )
        self.last_sample_s = time.perf_counter() - sampling_start
        return drafts, targets

    def rollback(self, kept: list[int], next_inputs: list[int]) -> None:
        """Keep `kept[i]` of the width+1 positions row i wrote; feed `next_inputs` next."""
        surplus = [self._width + 1 - k for k in kept]
        rollback_rows(self.cache, surplus)
        quantize_batch_cache(self.cache, self.kv)
        if self.draft is not None:
            self.draft.rollback(surplus)
        self.inputs = mx.array(next_inputs, dtype=mx.uint32)
        self.input_is_sampled = [False] * len(self.rows)

    @staticmethod
    def _verify_contexts(row: RequestState, draft: list[int]) -> list[mx.array | None]:
        if not row.sampler.uses_context:
            return [None] * (len(draft) + 1)
        n = row.sampler.params.repetition_context
        history = row.history
        return [
            mx.array((history + draft[:j])[-n:], dtype=mx.uint32) for j in range(len(draft) + 1)
        ]
