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
from engine.bench.options import parse_args
from engine.bench.process_exit import run_and_exit
from engine.bench.result_rows import make_row, print_row
from engine.bench.spec_configs import (
    DECODE_ATTENTION,
    ahead_choice,
    arm,
    decode_attention_choice,
    set_mode,
    spec_configs,
    take_timing,
)
from engine.bench.synthetic import SyntheticDrafter
from engine.bench.workloads import messages_for, prompt_ids
from engine.default_model import default_cache_root
from engine.kernels.as_shipped import mlx_as_shipped
from engine.kernels.compiled_cache import keep_compiled_kernels
from engine.requests import (
    SpecMethod,
    SpeculativeParams,
)


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
