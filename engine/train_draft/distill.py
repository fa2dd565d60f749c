"""Self-distillation data: the target's own replies to generated prompts, made with mlx-lm's
BatchGenerator (temperature 0, and sampled at a seeded temperature)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
from mlx_lm.generate import BatchGenerator
from mlx_lm.sample_utils import make_sampler

from engine.prompt import apply_chat_template
from engine.train_draft.prompts import messages

DEFAULT_BATCH = 256


@dataclass
class Sample:
    """One training sequence: the prompt's ids and the target's reply to it."""

    prompt: list[int]
    reply: list[int]
    temperature: float

    @property
    def tokens(self) -> list[int]:
        return self.prompt + self.reply


def generate_replies(
    model: Any,
    tokenizer: Any,
    prompts: list[str],
    *,
    temperature: float,
    max_tokens: int,
    seed: int,
    batch_size: int = DEFAULT_BATCH,
    log: Callable[[str], None] = print,
) -> list[Sample]:
    """The target's reply to every prompt, in prompt order."""
    mx.random.seed(seed)
    ids = [apply_chat_template(messages(p), tokenizer) for p in prompts]
    sampler = make_sampler(temp=temperature)
    generator = BatchGenerator(
        model,
        max_tokens=max_tokens,
        stop_tokens=[[t] for t in tokenizer.eos_token_ids],
        sampler=sampler,
        completion_batch_size=batch_size,
        prefill_batch_size=min(batch_size, 64),
    )
    start = time.perf_counter()
    uids = generator.insert(ids, [max_tokens] * len(ids))
    index = {uid: i for i, uid in enumerate(uids)}
    replies: list[list[int]] = [[] for _ in ids]
    done = 0
    while done < len(ids):
        for response in generator.next_generated():
            i = index[response.uid]
            # the end-of-turn token is kept too: the head learns where replies end
            replies[i].append(response.token)
            if response.finish_reason is not None:
                done += 1
    generator.close()
    tokens = sum(len(r) for r in replies)
    log(
        f"generated {len(ids)} replies at temperature {temperature}: {tokens} tokens "
        f"in {time.perf_counter() - start:.1f}s"
    )
    return [Sample(p, r, temperature) for p, r in zip(ids, replies)]


def save_samples(path: Path, samples: list[Sample]) -> None:
    """Write samples to one .npz (all tokens in one array, with each sample's lengths)."""
    tokens = [t for s in samples for t in s.tokens]
    np.savez_compressed(
        path,
        tokens=np.array(tokens, dtype=np.int32),
        prompt_lengths=np.array([len(s.prompt) for s in samples], dtype=np.int32),
        reply_lengths=np.array([len(s.reply) for s in samples], dtype=np.int32),
        temperatures=np.array([s.temperature for s in samples], dtype=np.float32),
    )


def load_samples(path: Path) -> list[Sample]:
    """The samples `save_samples` wrote."""
    with np.load(path) as data:
        tokens = data["tokens"].tolist()
        lengths = zip(data["prompt_lengths"].tolist(), data["reply_lengths"].tolist())
        temperatures = [round(float(t), 4) for t in data["temperatures"]]
    samples, at = [], 0
    for (n_prompt, n_reply), temperature in zip(lengths, temperatures):
        prompt, reply = tokens[at : at + n_prompt], tokens[at + n_prompt : at + n_prompt + n_reply]
        samples.append(Sample(prompt, reply, temperature))
        at += n_prompt + n_reply
    return samples
