"""The command line of `python -m engine.bench`: its options and their checks (a value out of
range, or options that do not go together, is a usage error)."""

from __future__ import annotations

import argparse
from pathlib import Path

from engine.bench.cli_args import fraction, int_range, positive_int
from engine.bench.spec_configs import AHEAD_MODES, DECODE_ATTENTION
from engine.bench.workloads import CHAT_QUESTIONS, WORKLOADS
from engine.requests import (
    DEFAULT_NGRAM_MAX,
    DEFAULT_NGRAM_MIN,
    MAX_DRAFT_TOKENS,
    MAX_MAX_TOKENS,
    MAX_NGRAM,
    MAX_PROMPT_TOKENS,
    SpecMethod,
)

DESCRIPTION = (
    "python -m engine.bench: aggregate tokens/s of our engine and mlx-lm's BatchGenerator on the"
    " same prompts, in one process, runs alternated (these machines are noisy), plus a check"
    " that every row of ours equals mlx_lm.generate's tokens for that prompt alone."
)

DEFAULT_CONCURRENCY = (1, 4, 8)
DEFAULT_MAX_TOKENS = 64
DEFAULT_REPEATS = 2


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m engine.bench", description=DESCRIPTION)
    p.add_argument("--model", default=None, help="model folder, HF repo id, random:1b|8b|tiny|host")
    p.add_argument("--draft-model", default=None, help="draft model for --speculative draft")
    p.add_argument(
        "--mtp-weights",
        default=None,
        help="MTP weights (safetensors file or folder) for a --model folder that lacks them",
    )
    p.add_argument("--concurrency", type=positive_int, nargs="+", default=list(DEFAULT_CONCURRENCY))
    p.add_argument("--max-tokens", type=int_range(1, MAX_MAX_TOKENS), default=DEFAULT_MAX_TOKENS)
    p.add_argument(
        "--requests-per-slot",
        type=positive_int,
        default=1,
        help="each of the c slots serves this many prompts in turn (the next starts when one"
        " finishes), so a run covers c x this many different prompts",
    )
    p.add_argument("--workload", choices=WORKLOADS, default="chat")
    p.add_argument(
        "--speculative", choices=[m.value for m in SpecMethod], default=SpecMethod.OFF.value
    )
    # a request's draft_tokens is 1..MAX_DRAFT_TOKENS: 0 would not mean "no drafting"
    draft_tokens = int_range(1, MAX_DRAFT_TOKENS, hint="for no drafting use --speculative off")
    p.add_argument("--draft-tokens", type=draft_tokens, nargs="+", default=[4])
    ngram = int_range(1, MAX_NGRAM)
    p.add_argument("--ngram-min", type=ngram, default=None, help="prompt lookup's shortest n-gram")
    p.add_argument("--ngram-max", type=ngram, default=None, help="prompt lookup's longest n-gram")
    p.add_argument(
        "--acceptance",
        type=fraction,
        nargs="+",
        default=[0.7],
        help="synthetic drafter's acceptance rates",
    )
    p.add_argument(
        "--repeats", type=positive_int, default=DEFAULT_REPEATS, help="alternated runs each"
    )
    p.add_argument(
        "--prefill-chunk", type=positive_int, default=None, help="default: the engine's, by device"
    )
    p.add_argument(
        "--long-tokens",
        type=int_range(1, MAX_PROMPT_TOKENS),
        default=2048,
        help="long-prompt workload's prompt",
    )
    p.add_argument("--no-baseline", action="store_true", help="skip mlx-lm's BatchGenerator")
    p.add_argument("--no-check", action="store_true", help="skip the mlx_lm.generate check")
    p.add_argument(
        "--no-warmup",
        action="store_true",
        help="skip the untimed runs (plain, baseline, each draft length) at each concurrency",
    )
    p.add_argument(
        "--auto-too",
        action="store_true",
        help='with --speculative synthetic: also run "auto" at each acceptance rate, its rows'
        " drafting with the synthetic drafter and each row's draft length chosen by auto",
    )
    p.add_argument(
        "--replay-too",
        action="store_true",
        help="also run each speculative setting with recurrent rows replaying kept tokens "
        "(engine/cache/recurrent.py), alternated with the default recompute in one process",
    )
    p.add_argument(
        "--serial-too",
        action="store_true",
        help="run each speculative setting with verify rounds always ahead and always in series "
        "(engine/core/lookahead.py), alternated in one process (--ahead-modes on off)",
    )
    p.add_argument(
        "--ahead-modes",
        nargs="+",
        choices=list(AHEAD_MODES) + ["default"],
        default=None,
        help="run each speculative setting with verify rounds these ways, alternated in one "
        "process: measured (each batch size times both, engine/core/ahead_choice.py), on "
        "(always ahead), off (in series), default (EngineConfig's)",
    )
    p.add_argument(
        "--baselines-on-our-kernels",
        action="store_true",
        help="run mlx-lm's baselines and reference on Tandem's CUDA kernels too (default: MLX's"
        " own, as mlx-lm ships; engine/kernels/as_shipped.py)",
    )
    p.add_argument(
        "--decode-attention",
        choices=tuple(DECODE_ATTENTION),
        default="kernel",
        help="a ragged plain step's attention on CUDA: the kernel (the default), MLX's ops, or "
        "measured per batch size (engine/core/decode_attention_choice.py)",
    )
    p.add_argument("--json", type=Path, default=None, help="write results here")
    p.add_argument("--chart", type=Path, default=None, help="synthetic sweep chart (PNG)")
    args = p.parse_args(argv)
    if args.workload == "long-prompt" and args.speculative == SpecMethod.SYNTHETIC.value:
        p.error("--workload long-prompt drafts with a real drafter: draft, lookup, auto or mtp")
    if args.auto_too and args.speculative != SpecMethod.SYNTHETIC.value:
        p.error("--auto-too runs auto on the synthetic drafter: give --speculative synthetic")
    if args.workload == "multiturn" and args.repeats > len(CHAT_QUESTIONS):
        most = len(CHAT_QUESTIONS)
        p.error(f"--workload multiturn asks one question per repeat: --repeats at most {most}")
    if args.workload == "long-prompt" and len(args.draft_tokens) > 1:
        p.error("--workload long-prompt takes one --draft-tokens")  # it would use the first
    # an unset bound is the request's default: --ngram-min 6 alone is over its default max
    ngram_min = DEFAULT_NGRAM_MIN if args.ngram_min is None else args.ngram_min
    ngram_max = DEFAULT_NGRAM_MAX if args.ngram_max is None else args.ngram_max
    if ngram_min > ngram_max:
        unset = " by default" if args.ngram_max is None else ""
        p.error(f"--ngram-min ({ngram_min}) must be <= --ngram-max ({ngram_max}{unset})")
    return args
