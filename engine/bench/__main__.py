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

import engine  # noqa: F401  (OpenBLAS before MLX)
import mlx.core as mx

from engine import blas
from engine.api import Engine, EngineConfig
from engine.bench.baselines import (
    RunResult,
    reference_tokens,
    run_batch_generator,
    run_ours,
)
from engine.bench.workloads import WORKLOADS, messages_for, prompt_ids
from engine.requests import SpecMethod, SpeculativeParams

DEFAULT_CONCURRENCY = (1, 4, 8)
DEFAULT_MAX_TOKENS = 64
DEFAULT_REPEATS = 2


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m engine.bench", description=__doc__)
    p.add_argument("--model", default=None, help="model folder or HF repo id (default: SmolLM2)")
    p.add_argument("--concurrency", type=int, nargs="+", default=list(DEFAULT_CONCURRENCY))
    p.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS)
    p.add_argument("--workload", choices=WORKLOADS, default="chat")
    p.add_argument(
        "--speculative", choices=[m.value for m in SpecMethod], default=SpecMethod.OFF.value
    )
    p.add_argument("--draft-tokens", type=int, default=4)
    p.add_argument("--repeats", type=int, default=DEFAULT_REPEATS, help="alternated runs each")
    p.add_argument("--prefill-chunk", type=int, default=512)
    p.add_argument("--no-check", action="store_true", help="skip the mlx_lm.generate check")
    p.add_argument("--json", type=Path, default=None, help="write results here")
    return p.parse_args(argv)


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
    from engine.models import load_model

    loaded = load_model(args.model)
    model, tokenizer = loaded.model, loaded.tokenizer
    spec = SpeculativeParams(method=SpecMethod(args.speculative), draft_tokens=args.draft_tokens)
    eng = Engine(
        EngineConfig(
            model=args.model,
            prefill_chunk=args.prefill_chunk,
            max_batch=max(args.concurrency),
            log_blas=False,
        )
    )
    eng.start()
    await eng.wait_ready()
    references: dict[tuple[int, ...], list[int]] = {}

    warm = [prompt_ids(tokenizer, m) for m in messages_for(args.workload, 2)]
    run_batch_generator(model, tokenizer, warm, 8)
    await run_ours(eng, warm, 8, speculative=spec)

    results = []
    for c in args.concurrency:
        prompts = [prompt_ids(tokenizer, m) for m in messages_for(args.workload, c)]
        base_runs: list[RunResult] = []
        our_runs: list[RunResult] = []
        for _ in range(args.repeats):
            base_runs.append(run_batch_generator(model, tokenizer, prompts, args.max_tokens))
            our_runs.append(await run_ours(eng, prompts, args.max_tokens, speculative=spec))
        lossless = None
        if not args.no_check:
            for p in prompts:
                if tuple(p) not in references:
                    references[tuple(p)] = reference_tokens(model, tokenizer, p, args.max_tokens)
            expected = [references[tuple(p)] for p in prompts]
            lossless = all(run.tokens == expected for run in our_runs)
            base_lossless = all(run.tokens == expected for run in base_runs)
        ours = statistics.median(r.tokens_per_s for r in our_runs)
        base = statistics.median(r.tokens_per_s for r in base_runs)
        row = {
            "concurrency": c,
            "speculative": args.speculative,
            "draft_tokens": args.draft_tokens if args.speculative != "off" else 0,
            "workload": args.workload,
            "max_tokens": args.max_tokens,
            "ours_tokens_per_s": round(ours, 2),
            "baseline_tokens_per_s": round(base, 2),
            "ratio": round(ours / base, 3) if base else None,
            "ours_mean_ttft_s": round(statistics.median(r.mean_ttft_s for r in our_runs), 3),
            "baseline_mean_ttft_s": round(statistics.median(r.mean_ttft_s for r in base_runs), 3),
            "lossless": lossless,
            "baseline_lossless": base_lossless if lossless is not None else None,
            "ours_runs_tokens_per_s": [round(r.tokens_per_s, 2) for r in our_runs],
            "baseline_runs_tokens_per_s": [round(r.tokens_per_s, 2) for r in base_runs],
        }
        results.append(row)
        print_row(row)
    await eng.stop()
    return {
        "command": "python -m engine.bench " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": machine(),
        "model": loaded.info.name,
        "results": results,
    }


def print_row(row: dict) -> None:
    print(
        f"c={row['concurrency']:>3} {row['workload']:<8} spec={row['speculative']:<9} "
        f"ours {row['ours_tokens_per_s']:8.2f} tok/s  mlx-lm {row['baseline_tokens_per_s']:8.2f} "
        f"tok/s  ratio {row['ratio']:.3f}  ttft ours {row['ours_mean_ttft_s']:.2f}s "
        f"mlx-lm {row['baseline_mean_ttft_s']:.2f}s  lossless={row['lossless']}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING)
    args = parse_args(argv)
    print(f"machine: {machine()}", flush=True)
    report = asyncio.run(bench(args))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))
        print(f"wrote {args.json}")
    return 0 if all(r["lossless"] is not False for r in report["results"]) else 1


if __name__ == "__main__":
    sys.exit(main())
