"""The running batch: rows that decode together over one batched KV cache.

Plain decoding is pipelined as in mlx-lm's GenerationBatch: the forward for step n+1 is queued
(`mx.async_eval`) before the tokens of step n are read back, so Python overhead overlaps compute.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx

from engine.request_state import RequestState
from engine.sampling import sample_rows


def merge_row_cache(row_cache: list[Any]) -> list[Any]:
    """A single request's per-layer caches as batch caches of one row (mlx-lm's `merge`)."""
    return [layer.merge([layer]) for layer in row_cache]


class DecodeBatch:
    def __init__(self, model: Any) -> None:
        self.model = model
        self.rows: list[RequestState] = []
        self.cache: list[Any] | None = None
        self.inputs: mx.array | None = None  # [B] next input tokens, possibly not yet evaluated
        self.input_is_sampled: list[bool] = []  # True: the pending input is a new token to emit

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, state: RequestState, row_cache: list[Any], last_prompt_token: int) -> None:
        batch_cache = merge_row_cache(row_cache)
        if self.cache is None or not self.rows:
            self.cache = batch_cache
        else:
            for mine, theirs in zip(self.cache, batch_cache):
                mine.extend(theirs)
        token = mx.array([last_prompt_token], dtype=mx.uint32)
        self.inputs = token if self.inputs is None else mx.concatenate([self.inputs, token])
        self.rows.append(state)
        self.input_is_sampled.append(False)

    def keep(self, indices: list[int]) -> None:
        """Keep only these rows (in this order)."""
        if len(indices) == len(self.rows):
            return
        if not indices:
            self.rows, self.cache, self.inputs, self.input_is_sampled = [], None, None, []
            return
        self.rows = [self.rows[i] for i in indices]
        self.input_is_sampled = [self.input_is_sampled[i] for i in indices]
        assert self.inputs is not None and self.cache is not None
        self.inputs = self.inputs[mx.array(indices)]
        for layer in self.cache:
            layer.filter(indices)

    def remove(self, states: list[RequestState]) -> None:
        gone = {id(s) for s in states}
        self.keep([i for i, row in enumerate(self.rows) if id(row) not in gone])

    def step(self) -> list[tuple[RequestState, int]]:
        """One pipelined decode step; returns the (row, token) pairs that became known."""
        assert self.inputs is not None
        inputs = self.inputs
        contexts = [self._context(i, inputs) for i in range(len(self.rows))]
        logits = self.model(inputs[:, None], cache=self.cache)[:, -1, :]
        sampled = sample_rows(logits, [r.sampler for r in self.rows], contexts)
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
