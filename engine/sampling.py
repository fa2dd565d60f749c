"""Per-row sampling for a batch: greedy, temperature with top-p/top-k/min-p, repetition penalty.

Each row owns its random key, so a seeded request samples the same tokens whatever else shares
the batch. The filters are mlx-lm's (`mlx_lm.sample_utils`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import mlx.core as mx
from mlx_lm.sample_utils import apply_min_p, apply_top_k, apply_top_p

from engine.requests import SamplingParams

DEFAULT_MIN_TOKENS_TO_KEEP = 1


def validate_sampling(params: SamplingParams, vocab_size: int) -> None:
    """Raise ValueError with a readable message for settings that cannot work."""
    if params.temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {params.temperature}")
    if not 0.0 < params.top_p <= 1.0:
        raise ValueError(f"top-p must be in (0, 1], got {params.top_p}")
    if params.top_k < 0 or params.top_k >= vocab_size:
        raise ValueError(f"top-k must be between 0 (off) and {vocab_size - 1}, got {params.top_k}")
    if not 0.0 <= params.min_p < 1.0:
        raise ValueError(f"min-p must be in [0, 1), got {params.min_p}")
    if params.repetition_penalty <= 0:
        raise ValueError(f"repetition penalty must be > 0, got {params.repetition_penalty}")


@dataclass
class RowSampler:
    """Turns one row's logits into a token; keeps the row's random key between steps."""

    params: SamplingParams
    key: mx.array | None = field(default=None)

    def __post_init__(self) -> None:
        if not self.params.greedy:
            seed = self.params.seed if self.params.seed is not None else random.getrandbits(63)
            self.key = mx.random.key(seed)

    @property
    def greedy(self) -> bool:
        return self.params.greedy

    @property
    def uses_context(self) -> bool:
        return self.params.repetition_penalty != 1.0

    def process(self, logits: mx.array, context: mx.array | None) -> mx.array:
        """Logits processors (repetition penalty) over [N, V] logits, N positions of one row."""
        if not self.uses_context or context is None or context.size == 0:
            return logits
        tokens = context[-self.params.repetition_context :]
        selected = logits[:, tokens]
        penalty = self.params.repetition_penalty
        selected = mx.where(selected < 0, selected * penalty, selected / penalty)
        logits[:, tokens] = selected
        return logits

    def filter(self, logprobs: mx.array) -> mx.array:
        """Top-p, min-p and top-k masks over [N, V] log-probabilities (as mlx-lm orders them)."""
        p = self.params
        if 0.0 < p.top_p < 1.0:
            logprobs = apply_top_p(logprobs, p.top_p)
        if p.min_p > 0.0:
            logprobs = apply_min_p(logprobs, p.min_p, DEFAULT_MIN_TOKENS_TO_KEEP)
        if p.top_k > 0:
            logprobs = apply_top_k(logprobs, p.top_k)
        return logprobs

    def next_key(self) -> mx.array:
        assert self.key is not None
        self.key, sub = mx.random.split(self.key)
        return sub

    def sample(self, logprobs: mx.array) -> mx.array:
        """Sample one token per position from [N, V] log-probabilities; returns [N] uint32."""
        if self.greedy:
            return mx.argmax(logprobs, axis=-1).astype(mx.uint32)  # logits work as well
        filtered = self.filter(logprobs)
        scaled = filtered * (1.0 / self.params.temperature)
        return mx.random.categorical(scaled, key=self.next_key()).astype(mx.uint32)

    def probabilities(self, logprobs: mx.array) -> mx.array:
        """The distribution `sample` draws from, [N, V] (for rejection sampling)."""
        if self.greedy:
            return mx.eye(logprobs.shape[-1])[mx.argmax(logprobs, axis=-1)]
        filtered = self.filter(logprobs)
        return mx.softmax(filtered * (1.0 / self.params.temperature), axis=-1)


def log_softmax(logits: mx.array) -> mx.array:
    return logits - mx.logsumexp(logits, axis=-1, keepdims=True)


DEFAULT_TIE_TOLERANCE = 1e-5  # relative: far above float32 rounding after a shift by lse


def greedy_tokens(logits: mx.array) -> list[list[int]]:
    """mlx-lm's greedy choice, argmax(logits - logsumexp(logits)), for [B, N, V] logits.

    The logsumexp over the vocabulary costs as much as a small model's forward on a CPU. The
    shift keeps the order of the logits, so the raw argmax is the same token unless another
    logit lies within rounding of the largest; only those positions pay for the shift. On a GPU
    the shift is nearly free and a per-position fallback would cost a sync each: shift at once."""
    if mx.default_device().type == mx.DeviceType.gpu:
        return mx.argmax(log_softmax(logits), axis=-1).tolist()
    top = mx.max(logits, axis=-1, keepdims=True)
    near = mx.sum(logits >= top - DEFAULT_TIE_TOLERANCE * mx.maximum(mx.abs(top), 1.0), axis=-1)
    raw = mx.argmax(logits, axis=-1)
    mx.eval(raw, near)
    tokens, near = raw.tolist(), near.tolist()
    for i, row in enumerate(near):
        for j, count in enumerate(row):
            if count > 1:
                tokens[i][j] = mx.argmax(log_softmax(logits[i, j]), axis=-1).item()
    return tokens


def sample_rows(
    logits: mx.array, samplers: list[RowSampler], contexts: list[mx.array | None]
) -> mx.array:
    """Sample the last position of each row of [B, V] logits; one batched argmax when all greedy."""
    if all(s.greedy and not s.uses_context for s in samplers):
        # argmax of log-probabilities, as mlx-lm does, so near-ties break the same way
        return mx.argmax(log_softmax(logits), axis=-1).astype(mx.uint32)
    tokens = []
    for i, sampler in enumerate(samplers):
        row = sampler.process(logits[i : i + 1], contexts[i])
        tokens.append(sampler.sample(log_softmax(row)))
    return mx.concatenate(tokens, axis=0)


def sample_positions(
    logits: mx.array,
    samplers: list[RowSampler],
    contexts: list[list[mx.array | None]],
    lengths: list[int],
) -> list[list[int]]:
    """Target tokens at the first `lengths[i]` positions of row i of [B, N, V] verify logits.

    `contexts[i][j]` is row i's token context for position j (repetition penalty), or None.
    A row samples only its own positions, so a row without a draft draws exactly what a
    plain decode step would have drawn with its key.
    """
    if all(s.greedy and not s.uses_context for s in samplers):
        tokens = greedy_tokens(logits)
        return [t[:n] for t, n in zip(tokens, lengths)]
    rows = []
    for i, sampler in enumerate(samplers):
        row = logits[i, : lengths[i]]
        if sampler.uses_context:
            row = mx.concatenate(
                [sampler.process(row[j : j + 1], contexts[i][j]) for j in range(row.shape[0])]
            )
        rows.append(sampler.sample(log_softmax(row)))
    mx.eval(rows)
    return [r.tolist() for r in rows]
