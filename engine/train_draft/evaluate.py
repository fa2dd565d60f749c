"""python -m engine.train_draft.evaluate [N] [--head CONFIG]: a draft head (default: the shipped
one), teacher-forced over the default model's greedy replies to the benchmark's first N `chat`
prompts (never trained on): top-1 of each chain step and the mean acceptance length of a k=3
greedy chain."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import mlx.core as mx

from engine.bench.baselines import reference_tokens
from engine.bench.cli_args import positive_int
from engine.bench.workloads import messages_for, prompt_ids
from engine.default_model import DEFAULT_MODEL_NAME
from engine.kernels.as_shipped import mlx_as_shipped
from engine.models import load_model
from engine.speculative.eagle_drafter import head_path
from engine.speculative.eagle_head import head_rows, load_head, target_parts
from engine.train_draft import objective
from engine.train_draft.distill import Sample
from engine.train_draft.train import make_batch

DEFAULT_PROMPTS = 16
DEFAULT_MAX_TOKENS = 64


def evaluate(
    n: int = DEFAULT_PROMPTS,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    *,
    head_config: Path | None = None,
) -> dict:
    """Teacher-forced numbers of a head (default: the shipped one) on the default model."""
    loaded = load_model(None)
    head = load_head(head_config or head_path(DEFAULT_MODEL_NAME))
    return evaluate_head(loaded.model, loaded.tokenizer, head, n=n, max_tokens=max_tokens)


def evaluate_head(
    model: Any, tokenizer: Any, head: Any, *, n: int, max_tokens: int = DEFAULT_MAX_TOKENS
) -> dict:
    """Teacher-forced numbers of the head on the first n benchmark chat prompts."""
    _, head_module = target_parts(model)
    rows = head_rows(head_module, head.draft_ids).astype(mx.float32)
    to_draft = mx.full((head.config.vocab_size,), -1, dtype=mx.int32)
    to_draft[head.draft_ids] = mx.arange(head.draft_ids.size, dtype=mx.int32)
    samples = []
    for messages in messages_for("chat", n):
        prompt = prompt_ids(tokenizer, messages)
        with mlx_as_shipped():  # mlx_lm.generate's reply as its users get it
            reply = reference_tokens(model, tokenizer, prompt, max_tokens)
        samples.append(Sample(prompt, reply, 0.0))
    return objective.accuracy(head, make_batch(model, samples, to_draft), rows, 3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.train_draft.evaluate")
    parser.add_argument("prompts", type=positive_int, nargs="?", default=DEFAULT_PROMPTS)
    parser.add_argument("--max-tokens", type=positive_int, default=DEFAULT_MAX_TOKENS)
    parser.add_argument("--head", type=Path, default=None, help="a head's .json (default: shipped)")
    args = parser.parse_args(argv)
    print(json.dumps(evaluate(args.prompts, args.max_tokens, head_config=args.head)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
