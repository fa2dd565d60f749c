"""python -m engine.bench: aggregate tokens/s of our engine and mlx-lm's BatchGenerator on the
same prompts, in one process, runs alternated (these machines are noisy), plus a check that every
row of ours equals mlx_lm.generate's tokens for that prompt alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import platform
import statistics
import sys
import time
from pathlib import Path

import mlx.core as mx

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine import blas
from engine.api import Engine, EngineConfig
from engine.bench.baselines import (
    RunResult,
    add_single_stream,
    mismatches,
    reference_tokens,
    run_batch_generator,
    run_mlx_lm_speculative,
    run_ours,
    run_single_stream,
)
from engine.bench.charts import speedup_chart
from engine.bench.cli_args import fraction, int_range, positive_int
from engine.bench.process_exit import run_and_exit
from engine.bench.result_rows import make_row, print_row
from engine.bench.spec_configs import (
    AHEAD_MODES,
    DECODE_ATTENTION,
    ahead_choice,
    arm,
    decode_attention_choice,
    set_mode,
    spec_configs,
    take_timing,
)
from engine.bench.synthetic import SyntheticDrafter
from engine.bench.workloads import CHAT_QUESTIONS, WORKLOADS, messages_for, prompt_ids
from engine.default_model import default_cache_root
from engine.kernels.as_shipped import mlx_as_shipped
from engine.kernels.compiled_cache import keep_compiled_kernels
from engine.requests import (
    DEFAULT_NGRAM_MAX,
    DEFAULT_NGRAM_MIN,
    MAX_DRAFT_TOKENS,
    MAX_MAX_TOKENS,
    MAX_NGRAM,
    MAX_PROMPT_TOKENS,
    SpecMethod,
    SpeculativeParams,
)

DEFAULT_CONCURRENCY = (1, 4, 8)
DEFAULT_MAX_TOKENS = 64
DEFAULT_REPEATS = 2


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m engine.bench", description=__doc__)
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


def machine() -> dict:
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "mlx": mx.__version__,
        "device": str(mx.default_device()),
        "blas": blas.info().name,
    }


async def bench(args: argparse.Namespace) -> dict:
    from engine.models import load_model as load_any

    loaded = load_any(args.model)
    model, tokenizer = loaded.model, loaded.tokenizer
    draft = load_any(args.draft_model) if args.draft_model else None
    synth = SyntheticDrafter(vocab_size=loaded.info.vocab_size)
    eng = Engine(
        EngineConfig(
            model=args.model,
            draft_model=args.draft_model,
            mtp_weights=((args.model, args.mtp_weights),) if args.mtp_weights else (),
            prefill_chunk=args.prefill_chunk,
            max_batch=max(args.concurrency),
            prompt_cache=False,  # repeated prompts would hit it; the baselines have none
            log_blas=False,
            extra_drafters=synth.entry(),
            decode_attention_kernel=DECODE_ATTENTION[args.decode_attention],
        )
    )
    eng.start()
    await eng.wait_ready()
    if args.model and args.model.startswith("random:"):
        # the engine built its own random weights: give the baselines the very same ones
        model = await eng.run_on_engine_thread(lambda: eng._worker.core_for().target.model)
    references: dict[tuple[int, ...], list[int]] = {}
    configs = spec_configs(args)

    def shipped():
        return mlx_as_shipped(enabled=not args.baselines_on_our_kernels)

    warm = [prompt_ids(tokenizer, m) for m in messages_for(args.workload, 2)]
    if not args.no_baseline:
        with shipped():
            run_batch_generator(model, tokenizer, warm, 8)
    await run_ours(eng, warm, 8)

    results = []
    for c in args.concurrency:
        per_slot = args.requests_per_slot
        slots = c if per_slot > 1 else None
        prompts = [prompt_ids(tokenizer, m) for m in messages_for(args.workload, c * per_slot)]
        need_refs = not args.no_check or any(s.acceptance is not None for s in configs)
        if need_refs:
            for p in prompts:
                if tuple(p) not in references:
                    with shipped():
                        references[tuple(p)] = reference_tokens(
                            model, tokenizer, p, args.max_tokens
                        )
        expected = [references[tuple(p)] for p in prompts] if need_refs else None
        base_runs: list[RunResult] = []
        plain_runs: list[RunResult] = []
        spec_runs: dict[int, list[RunResult]] = {i: [] for i in range(len(configs))}
        if not args.no_warmup:
            # untimed runs at this concurrency, plain and one per draft length, for every runner:
            # MLX's CUDA backend builds a graph per new shape (batch size, tokens per row), once
            # per process, and admitting c rows meets shapes a smaller run never did
            if not args.no_baseline:
                with shipped():
                    run_batch_generator(model, tokenizer, prompts, args.max_tokens, slots=slots)
            await run_ours(eng, prompts, args.max_tokens, slots=slots)
            for k in sorted({s.draft_tokens for s in configs}):
                spec = next(s for s in configs if s.draft_tokens == k)
                params = arm(synth, spec, prompts, expected or [])
                await run_ours(eng, prompts, args.max_tokens, speculative=params, slots=slots)
        single_runs: list[RunResult] = []
        for _ in range(args.repeats):  # alternated, so drift on a noisy machine hits all alike
            if not args.no_baseline:
                with shipped():
                    base_runs.append(
                        run_batch_generator(model, tokenizer, prompts, args.max_tokens, slots=slots)
                    )
                    if c == 1:
                        single_runs.append(
                            run_single_stream(model, tokenizer, prompts, args.max_tokens)
                        )
            await take_timing(eng)
            plain_run = await run_ours(eng, prompts, args.max_tokens, slots=slots)
            plain_run.timing = await take_timing(eng)
            plain_runs.append(plain_run)
            for i, spec in enumerate(configs):
                params = arm(synth, spec, prompts, expected or [])
                await set_mode(eng, spec)
                await take_timing(eng)
                run = await run_ours(eng, prompts, args.max_tokens, speculative=params, slots=slots)
                run.timing = await take_timing(eng)
                spec_runs[i].append(run)
            await set_mode(eng, None)
        choice = await ahead_choice(eng)
        attention = await decode_attention_choice(eng)
        mlx_spec = None
        if c == 1 and draft is not None and configs:
            with shipped():
                mlx_spec = statistics.median(
                    run_mlx_lm_speculative(
                        model,
                        draft.model,
                        tokenizer,
                        prompts,
                        args.max_tokens,
                        configs[0].draft_tokens,
                    ).tokens_per_s
                    for _ in range(args.repeats)
                )
        base = statistics.median(r.tokens_per_s for r in base_runs) if base_runs else None
        plain = statistics.median(r.tokens_per_s for r in plain_runs)
        variants = [(None, plain_runs)] + [(configs[i], runs) for i, runs in spec_runs.items()]
        for spec, runs in variants:
            if spec is None and configs:
                continue  # the plain runs are reported inside each speculative row
            row = make_row(
                args,
                c,
                spec,
                runs,
                base_runs,
                plain,
                base,
                expected,
                mlx_spec,
                plain_runs=plain_runs,
            )
            add_single_stream(row, single_runs, plain)
            if spec is not None and spec.ahead in ("measured", "default"):
                row["ahead_choice"] = choice  # per batch size, as it stands after the runs
            if attention:
                row["decode_attention_choice"] = attention
            if expected:
                row["mismatches"] = mismatches(model, prompts, expected, runs)
                row["plain_lossless"] = all(r.tokens == expected for r in plain_runs)
                row["plain_mismatches"] = mismatches(model, prompts, expected, plain_runs)
            results.append(row)
            print_row(row)
    await eng.stop()
    return {
        "command": "python -m engine.bench " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": machine(),
        "model": loaded.info.name,
        "draft_model": draft.info.name if draft else None,
        "baselines": "on Tandem's kernels" if args.baselines_on_our_kernels else "MLX as shipped",
        "results": results,
    }


def multiturn_report(args: argparse.Namespace) -> dict:
    from engine.bench.multiturn import print_multiturn, run_sync
    from engine.models import load_model as load_any

    loaded = load_any(args.model)
    row = run_sync(
        args.model, loaded.tokenizer, repeats=max(args.repeats, 1), reply_tokens=args.max_tokens
    )
    print_multiturn(row)
    return {
        "command": "python -m engine.bench " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": machine(),
        "model": loaded.info.name,
        "results": [row],
    }


def long_prompt_report(args: argparse.Namespace) -> dict:
    from engine.bench.long_prompt import print_long_prompt, run_sync

    speculative = None
    if args.speculative != SpecMethod.OFF.value:  # every request drafts so
        speculative = SpeculativeParams(
            method=SpecMethod(args.speculative), draft_tokens=args.draft_tokens[0]
        )
    rows = run_sync(
        args.model,
        long_tokens=args.long_tokens,
        prefill_chunk=args.prefill_chunk,
        repeats=args.repeats,
        speculative=speculative,
        draft_model=args.draft_model,
    )
    for row in rows:
        print_long_prompt(row)
    return {
        "command": "python -m engine.bench " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": machine(),
        "model": args.model or "default",
        "results": rows,
    }


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING)
    args = parse_args(argv)
    keep_compiled_kernels(default_cache_root())  # the baselines compile on this thread first
    print(f"machine: {machine()}", flush=True)
    if args.workload == "multiturn":
        report = multiturn_report(args)
    elif args.workload == "long-prompt":
        report = long_prompt_report(args)
    else:
        report = asyncio.run(bench(args))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))
        print(f"wrote {args.json}")
    if args.chart:
        title = f"{report['model']} on {report['machine']['device']}"
        if speedup_chart(report["results"], args.chart, title=title):
            print(f"wrote {args.chart}")
    return 0 if all(r.get("lossless") is not False for r in report["results"]) else 1


if __name__ == "__main__":
    run_and_exit(main)
