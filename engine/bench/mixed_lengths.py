"""Chats of very different lengths decoding together: attention by row groups against every row
over the longest row's padded keys (engine/cache/row_groups.py), alternated in one process.

    python -m engine.bench.mixed_lengths [--model random:1b] [--short 3] [--short-tokens 300]
        [--long-tokens 2048] [--max-tokens 48] [--repeats 3] [--speculative lookup] --json PATH

Each run submits `--short` prompts of `--short-tokens` and one of `--long-tokens` to an
EngineCore (all prefilled before decoding), greedy, and times the steps while every row decodes.
Both ways must give the same tokens, and with `--check` each row mlx_lm.generate's alone.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

from engine.bench.cli_args import positive_int
from engine.bench.process_exit import run_and_exit

DEFAULT_SHORT = 3
DEFAULT_SHORT_TOKENS = 300
DEFAULT_LONG_TOKENS = 2048
DEFAULT_MAX_TOKENS = 48
DEFAULT_REPEATS = 3


def make_prompts(short: int, short_tokens: int, long_tokens: int) -> list[list[int]]:
    """The long prompt second, so that its row sits between short ones."""
    rng = random.Random(0)
    lengths = [short_tokens] * short
    lengths.insert(min(1, short), long_tokens)
    return [[rng.randrange(100, 30000) for _ in range(n)] for n in lengths]


def run_once(core: Any, prompts: list[list[int]], max_tokens: int, spec: Any) -> dict[str, Any]:
    """Greedy replies, and the decode steps' time while every row decodes."""
    from engine.requests import ErrorEvent, GenerationRequest, TokenEvent

    ids = []
    for prompt in prompts:
        request = GenerationRequest(prompt_tokens=prompt, max_tokens=max_tokens, speculative=spec)
        ids.append(request.request_id)
        core.add(request)
    replies: dict[str, list[int]] = {rid: [] for rid in ids}
    steps, tokens = [], 0
    while core.has_work():
        together = len(core.executor.batch) == len(prompts) and not core.executor.prefilling
        start = time.perf_counter()
        events = core.step()
        elapsed = time.perf_counter() - start
        emitted = 0
        for event in events:
            if isinstance(event, ErrorEvent):
                raise RuntimeError(event.message)
            if isinstance(event, TokenEvent):
                replies[event.request_id].extend(event.token_ids)
                emitted += len(event.token_ids)
        if together:
            steps.append(elapsed)
            tokens += emitted
    return {
        "replies": [replies[rid] for rid in ids],
        "step_ms": round(1e3 * statistics.median(steps), 2) if steps else None,
        "tokens_per_s": round(tokens / sum(steps), 2) if steps else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model folder or random:1b|8b")
    parser.add_argument("--short", type=positive_int, default=DEFAULT_SHORT)
    parser.add_argument("--short-tokens", type=positive_int, default=DEFAULT_SHORT_TOKENS)
    parser.add_argument("--long-tokens", type=positive_int, default=DEFAULT_LONG_TOKENS)
    parser.add_argument("--max-tokens", type=positive_int, default=DEFAULT_MAX_TOKENS)
    parser.add_argument("--repeats", type=positive_int, default=DEFAULT_REPEATS)
    parser.add_argument("--speculative", choices=["off", "lookup"], default="off")
    parser.add_argument("--check", action="store_true", help="each row against mlx_lm.generate")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    import mlx.core as mx

    from engine.api import EngineConfig
    from engine.cache import row_groups
    from engine.core.engine_core import EngineCore
    from engine.models import load_model
    from engine.requests import SpecMethod, SpeculativeParams

    loaded = load_model(args.model)
    prompts = make_prompts(args.short, args.short_tokens, args.long_tokens)
    config = EngineConfig(
        model=args.model,
        prefill_chunk=sum(len(p) for p in prompts),  # every prompt before decoding starts
        prefill_gap_factor=None,
        max_batch=len(prompts),
        prompt_cache=False,
        log_blas=False,
    )
    core = EngineCore(loaded, config=config)
    spec = SpeculativeParams()
    if args.speculative == "lookup":
        spec = SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=4)
    runs: dict[str, list[dict[str, Any]]] = {"grouped": [], "padded": []}
    try:
        for i in range(args.repeats + 1):  # the first pair warms up, untimed
            for way in ("grouped", "padded") if i % 2 == 0 else ("padded", "grouped"):
                row_groups.set_enabled(way == "grouped")
                before = row_groups.split_calls()
                result = run_once(core, prompts, args.max_tokens, spec)
                result["split_calls"] = row_groups.split_calls() - before
                if i:
                    runs[way].append(result)
    finally:
        row_groups.set_enabled(None)
    replies = {way: runs[way][0]["replies"] for way in runs}
    same = all(r["replies"] == replies["grouped"] for way in runs for r in runs[way])
    report: dict[str, Any] = {
        "model": loaded.info.name,
        "device": str(mx.default_device()),
        "lengths": [len(p) for p in prompts],
        "speculative": args.speculative,
        "same_tokens": same,
    }
    for way, results in runs.items():
        report[f"{way}_step_ms"] = statistics.median(r["step_ms"] for r in results)
        report[f"{way}_tokens_per_s"] = statistics.median(r["tokens_per_s"] for r in results)
        report[f"{way}_runs_tokens_per_s"] = [r["tokens_per_s"] for r in results]
        report[f"{way}_split_calls"] = results[-1]["split_calls"]  # attention calls split
    report["ratio"] = round(report["grouped_tokens_per_s"] / report["padded_tokens_per_s"], 3)
    if args.check:
        from mlx_lm.generate import generate_step

        alone = []
        for prompt in prompts:
            steps = generate_step(mx.array(prompt), loaded.model, max_tokens=args.max_tokens)
            alone.append([int(token) for token, _ in steps])
        report["lossless"] = [
            got == want[: len(got)] for got, want in zip(replies["grouped"], alone)
        ]
    print(
        f"{report['model']} on {report['device']}, rows of {report['lengths']} tokens, "
        f"speculation {args.speculative}: grouped {report['grouped_tokens_per_s']:.1f} tok/s "
        f"({report['grouped_step_ms']:.1f} ms a step), padded {report['padded_tokens_per_s']:.1f} "
        f"tok/s ({report['padded_step_ms']:.1f} ms): {report['ratio']:.3f}x "
        f"({report['grouped_split_calls']} attention calls split a run); same tokens: {same}"
        + (f"; equal to mlx_lm.generate alone: {report['lossless']}" if args.check else "")
    )
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0 if same and all(report.get("lossless", [True])) else 1


if __name__ == "__main__":
    run_and_exit(main)
