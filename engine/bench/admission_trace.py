"""Where admission goes: `concurrency` chat prompts arrive at once, and EngineCore is stepped (no
asyncio) until every row has its first token. Each step's plan (rows joining the batch, prompts
admitted, prompt tokens prefilled, rows decoding) is printed with its wall time, beside the time
mlx-lm's BatchGenerator takes to give every row its first token, alternated over `--repeats`
runs after an untimed one of each.

`python -m engine.bench.admission_trace --model random:1b --concurrency 32 --repeats 3`

`--prompt-tokens N` makes each prompt N tokens long (its chat prompt repeated); `--paced-too`
also runs each turn with the burst's rows owed their gap, as before bursts were told apart
(engine/core/scheduler.py, `burst_s`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from engine.bench.baselines import batch_generator
from engine.bench.cli_args import float_at_least, int_range, positive_int
from engine.bench.workloads import messages_for, prompt_ids
from engine.config import DEFAULT_PREFILL_GAP_FACTOR
from engine.requests import MAX_PROMPT_TOKENS, ErrorEvent, GenerationRequest, TokenEvent

DEFAULT_CONCURRENCY = 32
DEFAULT_REPEATS = 3


def gap_factor(text: str) -> float | None:
    """--gap-factor: 'none' (whole chunks), or a factor >= 1 (a step with a prompt's chunk takes
    about that many decode steps; below 1 the prompt's share of it would be negative)."""
    if text.strip().lower() == "none":
        return None
    return float_at_least(1.0)(text)


def trace_ours(core: Any, prompts: list[list[int]], *, burst_s: float | None = None) -> dict:
    """Step until every row has a first token; each step's plan and wall time (`burst_s`: the
    scheduler's burst window for this run)."""
    scheduler = core.scheduler
    default_burst_s = scheduler.burst_s
    if burst_s is not None:
        scheduler.burst_s = burst_s
    plans: list[Any] = []
    schedule = scheduler.schedule

    def recorded():
        plan = schedule()
        plans.append(plan)
        return plan

    scheduler.schedule = recorded
    ids = []
    start = time.perf_counter()
    for p in prompts:
        request = GenerationRequest(prompt_tokens=p, max_tokens=64)
        ids.append(request.request_id)
        core.add(request)
    first: dict[str, float] = {}
    steps = []
    try:
        while core.has_work() and len(first) < len(ids):
            began = time.perf_counter()
            events = core.step()
            now = time.perf_counter()
            for event in events:
                if isinstance(event, ErrorEvent):
                    raise RuntimeError(event.message)
                if isinstance(event, TokenEvent) and event.token_ids:
                    first.setdefault(event.request_id, now - start)
            plan = plans[-1]
            steps.append(
                {
                    "ms": round(1e3 * (now - began), 2),
                    "join": len(plan.join),
                    "admit": len(plan.admit),
                    "prefill_rows": len(plan.prefill),
                    "prefill_tokens": sum(c.tokens for c in plan.prefill),
                    "decode_rows": len(plan.decode),
                    "with_first_token": len(first),
                }
            )
    finally:
        scheduler.schedule = schedule
        scheduler.burst_s = default_burst_s
        for rid in ids:
            core.cancel(rid)
        while core.has_work():
            core.step()
    return {
        "all_first_s": max(first.values()),
        "mean_ttft_s": statistics.fmean(first.values()),
        "steps": steps,
    }


def trace_batch_generator(model: Any, tokenizer: Any, prompts: list[list[int]]) -> dict:
    """BatchGenerator, as the benchmark drives it, until every row has a first token."""
    start = time.perf_counter()
    gen = batch_generator(model, tokenizer, len(prompts))
    uids = gen.insert(prompts, [64] * len(prompts))
    first: dict[int, float] = {}
    while len(first) < len(uids) and (responses := gen.next_generated()):
        now = time.perf_counter() - start
        for r in responses:
            first.setdefault(r.uid, now)
    gen.close()
    return {"all_first_s": max(first.values()), "mean_ttft_s": statistics.fmean(first.values())}


def print_steps(steps: list[dict]) -> None:
    print("  step   ms  join admit prefill(rows/tokens) decode first")
    for i, s in enumerate(steps):
        print(
            f"  {i:4d} {s['ms']:6.1f} {s['join']:4d} {s['admit']:5d} "
            f"{s['prefill_rows']:7d}/{s['prefill_tokens']:<6d} {s['decode_rows']:6d} "
            f"{s['with_first_token']:5d}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.admission_trace")
    parser.add_argument("--model", default="random:tiny")
    parser.add_argument("--concurrency", type=positive_int, default=DEFAULT_CONCURRENCY)
    parser.add_argument("--repeats", type=positive_int, default=DEFAULT_REPEATS)
    parser.add_argument(
        "--prefill-chunk", type=positive_int, default=None, help="default: by device"
    )
    parser.add_argument(
        "--gap-factor",
        type=gap_factor,
        default=DEFAULT_PREFILL_GAP_FACTOR,
        help="the prefill pacer's gap factor (>= 1); 'none': whole chunks beside decoding rows",
    )
    parser.add_argument(
        "--prompt-tokens",
        type=int_range(1, MAX_PROMPT_TOKENS),
        default=None,
        help="default: chat prompts",
    )
    parser.add_argument(
        "--paced-too", action="store_true", help="also run with a burst's rows owed their gap"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    from engine.api import EngineConfig
    from engine.core.engine_core import EngineCore
    from engine.models import load_model

    loaded = load_model(args.model)
    config = EngineConfig(
        model=args.model,
        max_batch=max(32, args.concurrency),
        prefill_chunk=args.prefill_chunk,
        prefill_gap_factor=args.gap_factor,
        prompt_cache=False,
        log_blas=False,
    )
    core = EngineCore(loaded, config=config)
    messages = messages_for("chat", args.concurrency)
    prompts = [prompt_ids(loaded.tokenizer, m) for m in messages]
    if args.prompt_tokens is not None:
        prompts = [(p * (args.prompt_tokens // len(p) + 1))[: args.prompt_tokens] for p in prompts]
    trace_ours(core, prompts)  # untimed: kernels and graphs for these shapes
    trace_batch_generator(loaded.model, loaded.tokenizer, prompts)
    ours, theirs, paced = [], [], []
    for _ in range(args.repeats):
        ours.append(trace_ours(core, prompts))
        theirs.append(trace_batch_generator(loaded.model, loaded.tokenizer, prompts))
        if args.paced_too:
            paced.append(trace_ours(core, prompts, burst_s=-1.0))
    median = statistics.median
    report = {
        "model": loaded.info.name,
        "concurrency": args.concurrency,
        "prefill_chunk": config.step_prefill_chunk(),
        "gap_factor": config.prefill_gap_factor,
        "prompt_tokens": [len(p) for p in prompts],
        "ours_all_first_s": median(r["all_first_s"] for r in ours),
        "ours_mean_ttft_s": median(r["mean_ttft_s"] for r in ours),
        "batchgen_all_first_s": median(r["all_first_s"] for r in theirs),
        "batchgen_mean_ttft_s": median(r["mean_ttft_s"] for r in theirs),
        "ours_steps": ours[-1]["steps"],
        "ours_runs_all_first_s": [r["all_first_s"] for r in ours],
        "batchgen_runs_all_first_s": [r["all_first_s"] for r in theirs],
    }
    if paced:
        report["paced_all_first_s"] = median(r["all_first_s"] for r in paced)
        report["paced_mean_ttft_s"] = median(r["mean_ttft_s"] for r in paced)
        report["paced_runs_all_first_s"] = [r["all_first_s"] for r in paced]
        report["paced_steps"] = paced[-1]["steps"]
    print(
        f"{report['model']}, {args.concurrency} prompts at once, prefill chunk "
        f"{config.step_prefill_chunk()}, gap factor {config.prefill_gap_factor} ({args.repeats} runs each)"
    )
    print_steps(report["ours_steps"])
    print(
        f"every row's first token: ours {report['ours_all_first_s']:.3f} s, "
        f"BatchGenerator {report['batchgen_all_first_s']:.3f} s; mean time to first token: "
        f"ours {report['ours_mean_ttft_s']:.3f} s, BatchGenerator "
        f"{report['batchgen_mean_ttft_s']:.3f} s"
    )
    if paced:
        print(
            f"the burst's rows owed their gap: every row's first token "
            f"{report['paced_all_first_s']:.3f} s, mean {report['paced_mean_ttft_s']:.3f} s"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    from engine.bench.process_exit import run_and_exit

    run_and_exit(main)
