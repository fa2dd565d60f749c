"""Per-row sampling for a batch: greedy, temperature with top-p/top-k/min-p, repetition penalty.

Each row draws the n-th token of its reply with a key made from its seed and n alone, so a
seeded request samples the same tokens whatever else shares the batch and whether or not it
speculates (a verify round samples several positions at once, each with its own key). The
filters are mlx-lm's (`mlx_lm.sample_utils`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import mlx.core as mx
from mlx_lm.sample_utils import apply_min_p, apply_top_k, apply_top_p

from engine.requests import SamplingParams
from engine.validation import check_sampling, check_top_k

DEFAULT_MIN_TOKENS_TO_KEEP = 1
KEY_STRIDE = 0x9E3779B97F4A7C15  # odd: distinct positions give distinct seeds


def validate_sampling(params: SamplingParams, vocab_size: int) -> None:
    """Raise ValueError with a readable message for settings that cannot work."""
    check_sampling(params)
    check_top_k(params.top_k, vocab_size=vocab_size)


@dataclass
class RowSampler:
    """Turns one row's logits into tokens; the n-th token of the reply uses key(seed, n)."""

    params: SamplingParams
    seed: int = field(default=0)

    def __post_init__(self) -> None:
        if not self.params.greedy:
            given = self.params.seed
            self.seed = given if given is not None else random.getrandbits(63)

    @property
    def greedy(self) -> bool:
        return self.params.greedy

    @property
    def uses_context(self) -> bool:
        return self.params.repetition_penalty != 1.0

    def step_context(self, history: list[int], pending: mx.array | None) -> mx.array | None:
        """What a decode step's token is penalised against: the history's tail, then the
        `pending` input (a [1] array not yet read back) when there is one."""
        if not self.uses_context:
            return None
        tail = mx.array(history[-self.params.repetition_context :], dtype=mx.uint32)
        return tail if pending is None else mx.concatenate([tail, pending])

    def draft_contexts(self, history: list[int], draft: list[int]) -> list[mx.array | None]:
        """Per position 0..len(draft) of a verify round, the context its token sees."""
        if not self.uses_context:
            return [None] * (len(draft) + 1)
        n = self.params.repetition_context
        return [
            mx.array((history + draft[:j])[-n:], dtype=mx.uint32) for j in range(len(draft) + 1)
        ]

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

    def key_for(self, position: int) -> mx.array:
        """The key for the reply's token number `position` (0 is the first)."""
        return mx.random.key((self.seed + position * KEY_STRIDE) % 2**64)

    def sample(self, logprobs: mx.array, position: int) -> mx.array:
        """Sample [N, V] log-probabilities, rows being the reply's tokens number position,
        position + 1, ...; returns [N] uint32."""
        if self.greedy:
            return mx.argmax(logprobs, axis=-1).astype(mx.uint32)  # logits work as well
        scaled = self.filter(logprobs) * (1.0 / self.params.temperature)
        return mx.concatenate(
            [
                mx.random.categorical(scaled[j : j + 1], key=self.key_for(position + j))
                for j in range(scaled.shape[0])
            ]
        ).astype(mx.uint32)


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
    raw, near = mx.argmax(logits, axis=-1), near_ties(logits)
    mx.eval(raw, near)
    tokens, near = raw.tolist(), near.tolist()
    for i, row in enumerate(near):
        for j, count in enumerate(row):
            if count > 1:
                tokens[i][j] = tie_broken(logits[i, j])
    return tokens


def near_ties(logits: mx.array) -> mx.array:
    """How many logits lie within rounding of the largest, per position (greedy_tokens)."""
    top = mx.max(logits, axis=-1, keepdims=True)
    return mx.sum(logits >= top - DEFAULT_TIE_TOLERANCE * mx.maximum(mx.abs(top), 1.0), axis=-1)


def tie_broken(logits: mx.array) -> int:
    """mlx-lm's greedy token for one position's [V] logits whose largest is nearly tied."""
    return mx.argmax(log_softmax(logits), axis=-1).item()


def sample_rows(
    logits: mx.array,
    samplers: list[RowSampler],
    contexts: list[mx.array | None],
    positions: list[int],
) -> tuple[mx.array, dict[int, str]]:
    """Sample the last position of each row of [B, V] logits, the reply's token number
    `positions[i]` for row i; one batched argmax when all greedy. Returns the [B] tokens and
    the rows whose sampler raised (their message; their token is a placeholder)."""
    if all(s.greedy and not s.uses_context for s in samplers):
        # argmax of log-probabilities, as mlx-lm does, so near-ties break the same way
        return mx.argmax(log_softmax(logits), axis=-1).astype(mx.uint32), {}
    tokens, failures = [], {}
    for i, sampler in enumerate(samplers):
        try:
            row = sampler.process(logits[i : i + 1], contexts[i])
            tokens.append(sampler.sample(log_softmax(row), positions[i]))
        except Exception as exc:  # noqa: BLE001 - one row's sampler fails that row only
            failures[i] = f"sampling failed: {exc}"
            tokens.append(mx.zeros((1,), dtype=mx.uint32))
    return mx.concatenate(tokens, axis=0), failures


def sample_positions(
    logits: mx.array,
    samplers: list[RowSampler],
    contexts: list[list[mx.array | None]],
    lengths: list[int],
    positions: list[int],
    starts: list[int] | None = None,
) -> tuple[list[list[int] | None], dict[int, str]]:
    """Target tokens at `lengths[i]` positions of row i of [B, N, V] verify logits, from
    `starts[i]` (default 0), which are the reply's tokens number positions[i], positions[i] + 1,
    ...; and the rows whose sampler raised (None in the tokens, their message in the dict).

    `contexts[i][j]` is row i's token context for position j (repetition penalty), or None.
    Each position draws with the key a plain decode step would use for it.
    """
    starts = starts or [0] * len(samplers)
    if all(s.greedy and not s.uses_context for s in samplers):
        tokens = greedy_tokens(logits)
        return [t[a : a + n] for t, a, n in zip(tokens, starts, lengths)], {}
    rows: list[mx.array | None] = []
    failures: dict[int, str] = {}
    for i, sampler in enumerate(samplers):
        try:
            row = logits[i, starts[i] : starts[i] + lengths[i]]
            if sampler.uses_context:
                row = mx.concatenate(
                    [sampler.process(row[j : j + 1], contexts[i][j]) for j in range(row.shape[0])]
                )
            rows.append(sampler.sample(log_softmax(row), positions[i]))
        except Exception as exc:  # noqa: BLE001 - one row's sampler fails that row only
            failures[i] = f"sampling failed: {exc}"
            rows.append(None)
    mx.eval([r for r in rows if r is not None])
    return [r.tolist() if r is not None else None for r in rows], failures
