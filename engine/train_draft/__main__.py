"""python -m engine.train_draft: train the default model's EAGLE-style draft head by
self-distillation (its own replies to generated prompts), reproducibly (fixed seeds).

Writes under --out: the head (`<name>.safetensors` float16, `<name>.json` with its sha256),
curve.json (loss and held-out top-1 / acceptance length per evaluation, and the head's numbers on
the benchmark's chat prompts), curve.png. With --data DIR the generated replies are kept in
DIR (train.npz, heldout.npz) and a later run reads them instead of generating again, so
generation and training can run as two calls (--generate-only for the first).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import mlx.core as mx
from mlx_lm import load

from engine.bench.cli_args import (
    int_range,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
)
from engine.default_model import DEFAULT_MODEL_NAME, default_dtype, ensure_default_model
from engine.gguf_convert import convert_gguf
from engine.speculative.eagle_head import HeadConfig, load_head
from engine.train_draft.curve import plot_curve
from engine.train_draft.distill import Sample, generate_replies, load_samples, save_samples
from engine.train_draft.evaluate import evaluate_head
from engine.train_draft.objective import DEFAULT_PASS_WEIGHTS
from engine.train_draft.prompts import DEFAULT_SEED, make_prompts
from engine.train_draft.train import TrainOptions, draft_vocabulary, train


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m engine.train_draft", description=__doc__)
    p.add_argument("--gguf", type=Path, default=None, help="convert this GGUF (default: embedded)")
    p.add_argument("--out", type=Path, required=True)
    # no training replies: training would loop forever over no batches; no held-out ones:
    # every evaluation would read 0
    p.add_argument("--train-prompts", type=positive_int, default=6000)
    p.add_argument("--heldout-prompts", type=positive_int, default=128)
    p.add_argument("--temperatures", type=non_negative_float, nargs="+", default=[0.0, 0.7])
    p.add_argument("--max-tokens", type=positive_int, default=192)
    p.add_argument("--gen-batch", type=positive_int, default=256)
    p.add_argument(
        "--gen-chunk", type=positive_int, default=1024, help="prompts per generation round"
    )
    p.add_argument(
        "--gen-budget", type=positive_float, default=1e9, help="seconds; stops between chunks"
    )
    # MLX seeds are unsigned; per chunk and temperature the seed grows by 1000s (`generate`)
    p.add_argument("--seed", type=int_range(0, 2**32 - 1), default=DEFAULT_SEED)
    p.add_argument("--data", type=Path, default=None, help="keep or reuse generated replies here")
    p.add_argument("--generate-only", action="store_true", help="stop after saving --data")
    p.add_argument(
        "--bench-prompts",
        type=non_negative_int,
        default=32,
        help="evaluate the trained head on this many of the benchmark's chat prompts (0: none)",
    )
    defaults = TrainOptions()
    p.add_argument("--steps", type=positive_int, default=defaults.steps)
    p.add_argument(
        "--time-budget", type=positive_float, default=defaults.time_budget_s, help="seconds"
    )
    p.add_argument("--batch-tokens", type=positive_int, default=defaults.batch_tokens)
    p.add_argument("--lr", type=positive_float, default=defaults.lr)
    p.add_argument("--warmup", type=non_negative_int, default=defaults.warmup, help="0: none")
    p.add_argument("--eval-every", type=positive_int, default=defaults.eval_every)
    p.add_argument("--draft-vocab", type=positive_int, default=defaults.draft_vocab)
    # the loss weighs each pass of the unrolled head: as many passes as it has weights
    depth = int_range(1, len(DEFAULT_PASS_WEIGHTS))
    p.add_argument("--depth", type=depth, default=defaults.depth)
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return parser().parse_args(argv)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def model_folder(gguf: Path | None, scratch: Path) -> Path:
    if gguf is None:
        return ensure_default_model()
    folder = scratch / "model"
    folder.mkdir()
    convert_gguf(gguf, folder, dtype=default_dtype())
    return folder


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # the prompt generator's pools bound the counts; drawing takes a second, not a model load
    try:
        prompts = make_prompts(args.train_prompts, args.heldout_prompts, seed=args.seed)
    except ValueError as exc:
        parser().error(f"--train-prompts / --heldout-prompts: {exc}")
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    log(f"mlx {mx.__version__} on {mx.default_device()}")
    with tempfile.TemporaryDirectory(prefix="tandem-train-draft-") as scratch:
        model, tokenizer = load(str(model_folder(args.gguf, Path(scratch))))
    log(f"target loaded ({time.perf_counter() - started:.1f}s)")
    if args.data and (args.data / "train.npz").exists():
        train_set = load_samples(args.data / "train.npz")
        heldout = load_samples(args.data / "heldout.npz")
        log(f"read {len(train_set)} training and {len(heldout)} held-out replies from {args.data}")
    else:
        heldout, train_set = generate(
            args, model, tokenizer, prompts.heldout, prompts.train, started
        )
        if args.data:
            args.data.mkdir(parents=True, exist_ok=True)
            save_samples(args.data / "train.npz", train_set)
            save_samples(args.data / "heldout.npz", heldout)
            log(f"saved {len(train_set)} training and {len(heldout)} held-out replies")
    if args.generate_only:
        return 0
    generated_s = time.perf_counter() - started
    eos = list(tokenizer.eos_token_ids)
    ids = draft_vocabulary(train_set, args.draft_vocab, eos)
    covered = set(ids)
    replies = [t for s in heldout for t in s.reply]
    coverage = sum(t in covered for t in replies) / max(len(replies), 1)
    log(f"draft vocabulary {len(ids)} tokens covers {coverage:.1%} of held-out reply tokens")
    options = TrainOptions(
        steps=args.steps,
        time_budget_s=args.time_budget,
        batch_tokens=args.batch_tokens,
        lr=args.lr,
        warmup=args.warmup,
        eval_every=args.eval_every,
        seed=args.seed,
        draft_vocab=args.draft_vocab,
        depth=args.depth,
    )
    config = HeadConfig.for_target(model.args, draft_vocab_size=len(ids), target=DEFAULT_MODEL_NAME)
    curve = train(
        model,
        train_set,
        heldout,
        options=options,
        config=config,
        draft_ids=ids,
        out=args.out,
        log=log,
    )
    if args.bench_prompts:
        head = load_head(args.out / f"{options.name}.json")
        bench = evaluate_head(model, tokenizer, head, n=args.bench_prompts)
        curve.info["bench_chat"] = {"prompts": args.bench_prompts, **bench}
        log(f"on {args.bench_prompts} benchmark chat prompts: {json.dumps(bench)}")
    curve.info.update(
        generation_s=round(generated_s, 1),
        total_s=round(time.perf_counter() - started, 1),
        train_tokens=sum(len(s.tokens) for s in train_set),
        heldout_prompts=len(prompts.heldout),
        heldout_coverage=round(coverage, 4),
        device=str(mx.default_device()),
        mlx=mx.__version__,
        args={k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
    )
    curve.write(args.out / "curve.json")
    (args.out / "heldout_prompts.json").write_text(json.dumps(prompts.heldout, indent=1) + "\n")
    try:
        plot_curve(args.out / "curve.json", args.out / "curve.png")
    except ImportError as exc:
        log(f"no curve.png ({exc}); make it later: python -m engine.train_draft.curve")
    log(f"done in {time.perf_counter() - started:.1f}s: {json.dumps(asdict(curve)['points'][-1])}")
    return 0


def generate(
    args: argparse.Namespace,
    model: Any,
    tokenizer: Any,
    heldout_prompts: list[str],
    train_prompts: list[str],
    started: float,
) -> tuple[list[Sample], list[Sample]]:
    """The held-out replies (temperature 0), then the training replies in chunks, every
    temperature in each, until the generation budget is spent."""
    heldout = generate_replies(
        model,
        tokenizer,
        heldout_prompts,
        temperature=0.0,
        max_tokens=args.max_tokens,
        seed=args.seed,
        batch_size=args.gen_batch,
        log=log,
    )
    train_set: list[Sample] = []
    for first in range(0, len(train_prompts), args.gen_chunk):
        # the first chunk always runs: the budget stops between chunks, and training on no
        # replies would loop forever
        if first > 0 and time.perf_counter() - started > args.gen_budget:
            log(f"generation budget spent after {first} of {len(train_prompts)} prompts")
            break
        chunk = train_prompts[first : first + args.gen_chunk]
        for i, temperature in enumerate(args.temperatures):
            train_set += generate_replies(
                model,
                tokenizer,
                chunk,
                temperature=temperature,
                max_tokens=args.max_tokens,
                seed=args.seed + 1000 * i + first,
                batch_size=args.gen_batch,
                log=log,
            )
    return heldout, train_set


if __name__ == "__main__":
    sys.exit(main())
