"""The training loop: features from the frozen target on the fly, the unrolled objective,
AdamW with warm-up and cosine decay, held-out numbers and a checkpoint every `eval_every`."""

from __future__ import annotations

import json
import math
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as optim
from mlx.utils import tree_flatten

from engine.speculative.eagle_head import EagleHead, HeadConfig, head_rows, save_head, target_parts
from engine.train_draft import objective
from engine.train_draft.distill import Sample

PAD_MULTIPLE = 32


@dataclass
class TrainOptions:
    """How long and how hard to train."""

    steps: int = 2000
    time_budget_s: float = 1e9
    batch_tokens: int = 16384
    lr: float = 1e-3
    warmup: int = 100
    weight_decay: float = 0.0
    depth: int = 3
    eval_every: int = 100
    seed: int = 0
    draft_vocab: int = 8192
    name: str = "smollm2-135m-eagle"


@dataclass
class Curve:
    """The training curve: one point per evaluation."""

    points: list[dict] = field(default_factory=list)
    info: dict = field(default_factory=dict)

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1) + "\n", encoding="utf-8")


def draft_vocabulary(samples: list[Sample], size: int, eos_ids: list[int]) -> list[int]:
    """The `size` most frequent tokens of the replies and prompts, end-of-turn ids included."""
    counts = Counter(t for s in samples for t in s.tokens)
    ids = list(dict.fromkeys([*eos_ids, *(t for t, _ in counts.most_common(size))]))[:size]
    return sorted(ids)


def batches(samples: list[Sample], batch_tokens: int, rng: random.Random) -> list[list[Sample]]:
    """Length-sorted batches of about `batch_tokens` padded tokens each, in shuffled order."""
    order = sorted(samples, key=lambda s: len(s.tokens))
    out, current = [], []
    for sample in order:
        width = _padded(len(sample.tokens))
        if current and width * (len(current) + 1) > batch_tokens:
            out.append(current)
            current = []
        current.append(sample)
    if current:
        out.append(current)
    rng.shuffle(out)
    return out


def _padded(n: int) -> int:
    return -(-n // PAD_MULTIPLE) * PAD_MULTIPLE


def make_batch(model: Any, samples: list[Sample], to_draft: mx.array) -> objective.Batch:
    """Run the frozen target over the batch and build the head's inputs and targets."""
    L = _padded(max(len(s.tokens) for s in samples))
    rows = [s.tokens + [0] * (L - len(s.tokens)) for s in samples]
    tokens = mx.array(rows, dtype=mx.int32)
    lengths = mx.array([len(s.tokens) for s in samples])[:, None]
    starts = mx.array([len(s.prompt) for s in samples])[:, None]
    embed, head = target_parts(model)
    hidden = model.model(tokens)
    greedy = mx.argmax(head.as_linear(hidden) if hasattr(head, "as_linear") else head(hidden), -1)
    hidden = hidden.astype(mx.float32)
    positions = mx.arange(L - 1)[None]
    batch = objective.Batch(
        feats=hidden[:, :-1],
        embeds=embed(tokens[:, 1:]).astype(mx.float32),
        target_feats=hidden[:, 1:],
        labels=to_draft[greedy[:, 1:]],
        mask=positions < lengths - 1,
        reply=positions >= starts - 1,
    )
    mx.eval(batch.feats, batch.embeds, batch.labels, batch.mask, batch.reply)
    return batch


def init_head(model: Any, config: HeadConfig, ids: list[int]) -> EagleHead:
    """A head whose layer starts as a copy of the target's last layer and norm."""
    head = EagleHead(config)
    last = dict(tree_flatten(model.model.layers[-1].parameters()))
    head.layer.load_weights([(k, v.astype(mx.float32)) for k, v in last.items()], strict=True)
    head.norm.weight = model.model.norm.weight.astype(mx.float32)
    head.draft_ids = mx.array(ids, dtype=mx.int32)
    head.freeze(keys=["draft_ids"], recurse=False)
    mx.eval(head.parameters())
    return head


def train(
    model: Any,
    train_set: list[Sample],
    heldout: list[Sample],
    *,
    options: TrainOptions,
    config: HeadConfig,
    draft_ids: list[int],
    out: Path,
    log: Callable[[str], None] = print,
) -> Curve:
    """Train a head; writes `<name>.safetensors/.json` and curve.json under `out` as it goes."""
    mx.random.seed(options.seed)
    rng = random.Random(options.seed)
    model.freeze()
    head = init_head(model, config, draft_ids)
    _, head_module = target_parts(model)
    draft_head = head_rows(head_module, head.draft_ids).astype(mx.float32)
    to_draft = mx.full((config.vocab_size,), -1, dtype=mx.int32)
    to_draft[head.draft_ids] = mx.arange(len(draft_ids), dtype=mx.int32)
    optimizer = optim.AdamW(learning_rate=options.lr, weight_decay=options.weight_decay)
    weights = objective.DEFAULT_PASS_WEIGHTS[: options.depth]

    def loss_fn(h: EagleHead, batch: objective.Batch):
        return objective.loss(h, batch, draft_head, pass_weights=weights)

    step_fn = nn.value_and_grad(head, loss_fn)
    held_batches = [
        make_batch(model, chunk, to_draft)
        for chunk in batches(heldout, options.batch_tokens, random.Random(0))
    ]
    curve = Curve(info={"options": asdict(options), "train_samples": len(train_set)})
    start = time.perf_counter()
    step, epoch, recent = 0, 0, []
    while step < options.steps:
        for chunk in batches(train_set, options.batch_tokens, rng):
            batch = make_batch(model, chunk, to_draft)
            optimizer.learning_rate = _learning_rate(options, step, time.perf_counter() - start)
            (value, (ce, reg)), grads = step_fn(head, batch)
            grads, _ = optim.clip_grad_norm(grads, 1.0)
            optimizer.update(head, grads)
            mx.eval(head.parameters(), optimizer.state, value, ce, reg)
            step += 1
            recent.append((float(value), float(ce), float(reg)))
            over = time.perf_counter() - start > options.time_budget_s
            if step % options.eval_every == 0 or step >= options.steps or over:
                point = _evaluate(head, held_batches, draft_head, options.depth)
                point.update(
                    step=step,
                    epoch=epoch,
                    seconds=round(time.perf_counter() - start, 1),
                    loss=sum(r[0] for r in recent) / len(recent),
                    ce=sum(r[1] for r in recent) / len(recent),
                    reg=sum(r[2] for r in recent) / len(recent),
                    lr=float(optimizer.learning_rate),
                )
                recent = []
                curve.points.append(point)
                log(json.dumps(point))
                save_head(head, out, options.name)
                curve.write(out / "curve.json")
            if step >= options.steps or over:
                return curve
        epoch += 1
    return curve


def _learning_rate(options: TrainOptions, step: int, elapsed: float) -> float:
    """Linear warm-up, then cosine decay to 5% over the steps or the time budget, whichever
    ends first (so a run cut by time still ends at a low rate)."""
    if step < options.warmup:
        return options.lr * (0.01 + 0.99 * step / options.warmup)
    done = max(step / options.steps, elapsed / options.time_budget_s)
    return options.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(done, 1.0))))


def _evaluate(head: EagleHead, held: list[objective.Batch], draft_head: mx.array, depth: int):
    totals: dict[str, Any] = {"anchors": 0, "accept": 0.0, "top1": [0.0] * depth}
    for batch in held:
        r = objective.accuracy(head, batch, draft_head, depth)
        n = r["anchors"]
        totals["anchors"] += n
        totals["accept"] += r["accept_len"] * n
        totals["top1"] = [a + b * n for a, b in zip(totals["top1"], r["top1_by_step"])]
    n = max(totals["anchors"], 1)
    return {
        "heldout_top1": round(totals["top1"][0] / n, 4),
        "heldout_top1_by_step": [round(t / n, 4) for t in totals["top1"]],
        "heldout_accept_len": round(totals["accept"] / n, 4),
    }
