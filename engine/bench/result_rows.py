"""One row of the benchmark's results (a concurrency and a speculative setting): medians of
the alternated runs, ratios against the baselines, where the time went; and its printed line."""

from __future__ import annotations

import argparse
import statistics
from typing import TYPE_CHECKING

from engine.bench.baselines import RunResult, paired_ratio
from engine.core.step_timing import StepTiming
from engine.requests import SpecStats

if TYPE_CHECKING:
    from engine.bench.spec_configs import SpecConfig


def make_row(
    args: argparse.Namespace,
    c: int,
    spec: SpecConfig | None,
    runs: list[RunResult],
    base_runs: list[RunResult],
    plain: float,
    base: float | None,
    expected: list[list[int]] | None,
    mlx_spec: float | None,
    *,
    plain_runs: list[RunResult] | None = None,
) -> dict:
    """The JSON row for concurrency `c` and speculative config `spec` (None: plain)."""
    ours = statistics.median(r.tokens_per_s for r in runs)
    totals = SpecStats()
    timing = StepTiming()
    for r in runs:
        totals.add(r.spec)
        timing.add(r.timing)
    by_pos = [round(rate, 3) for rate in totals.acceptance_by_position]
    return {
        "concurrency": c,
        "requests": c * args.requests_per_slot,
        "speculative": spec.method.value if spec else "off",
        "draft_tokens": spec.draft_tokens if spec else 0,
        "acceptance": spec.acceptance if spec else None,
        "recurrent_replay": bool(spec and spec.replay),
        # verify rounds: "default" (EngineConfig.verify_ahead's), "measured", "on" or "off"
        "verify_ahead": spec.ahead if spec else "default",
        "workload": args.workload,
        "max_tokens": args.max_tokens,
        "ours_tokens_per_s": round(ours, 2),
        "baseline_tokens_per_s": round(base, 2) if base else None,
        "ratio": round(ours / base, 3) if base else None,
        "plain_tokens_per_s": round(plain, 2),
        "speedup_vs_plain": round(ours / plain, 3) if plain else None,
        "mlx_lm_speculative_tokens_per_s": round(mlx_spec, 2) if mlx_spec else None,
        "acceptance_by_position": by_pos,
        "mean_acceptance_length": round(totals.mean_acceptance_length, 3),
        # verify rounds by who drafted: an auto row drafts with its model or by prompt lookup
        "rounds_by_drafter": dict(totals.rounds_by_drafter),
        "guessed_rounds": totals.guessed_rounds,  # left out of the acceptance figures
        "ahead_rounds": totals.ahead_rounds,  # rounds queued before the last was read back
        "tokens_per_forward": round(totals.tokens_per_forward, 3),
        "ours_mean_ttft_s": round(statistics.median(r.mean_ttft_s for r in runs), 3),
        "baseline_mean_ttft_s": round(statistics.median(r.mean_ttft_s for r in base_runs), 3)
        if base_runs
        else None,
        "lossless": all(r.tokens == expected for r in runs) if expected else None,
        "ours_runs_tokens_per_s": [round(r.tokens_per_s, 2) for r in runs],
        "baseline_runs_tokens_per_s": [round(r.tokens_per_s, 2) for r in base_runs],
        "ratio_paired": paired_ratio(
            [r.tokens_per_s for r in runs], [r.tokens_per_s for r in base_runs]
        ),
        # the speed-up run by run (each speculative run against the plain run just before it):
        # a host that changes speed between runs moves it far less than a ratio of medians
        "plain_runs_tokens_per_s": [round(r.tokens_per_s, 2) for r in plain_runs or []],
        "speedup_paired": paired_ratio(
            [r.tokens_per_s for r in runs], [r.tokens_per_s for r in plain_runs or []]
        )
        if spec
        else None,
        "step_ms": timing.per_round_ms(),
        "verify_rounds": timing.verify_rounds,
        "plain_steps": timing.plain_steps,
    }


def print_row(row: dict) -> None:
    base = row["baseline_tokens_per_s"]
    extra = f" mlx-lm {base:8.2f} tok/s ratio {row['ratio']:.3f}" if base else ""
    if base and row.get("ratio_paired") is not None:
        extra += f" (paired {row['ratio_paired']:.3f})"
    if row.get("single_stream_tokens_per_s"):
        extra += (
            f" generate {row['single_stream_tokens_per_s']:.2f} x{row['ratio_vs_single_stream']}"
            f" (paired {row['ratio_vs_single_stream_paired']})"
        )
    accept = f" p={row['acceptance']}" if row["acceptance"] is not None else ""
    accept += " replay" if row.get("recurrent_replay") else ""
    mode = row.get("verify_ahead")
    accept += {"off": " serial", False: " serial", "on": " ahead", "measured": " measured"}.get(
        mode, ""
    )
    paired = f" (paired {row['speedup_paired']})" if row.get("speedup_paired") else ""
    k = "auto" if row["speculative"] == "auto" else row["draft_tokens"]  # auto: each row's own
    print(
        f"c={row['concurrency']:>3} {row['workload']:<8} spec={row['speculative']}"
        f"(k={k}{accept}) ours {row['ours_tokens_per_s']:8.2f} tok/s{extra}"
        f" plain {row['plain_tokens_per_s']:8.2f} x{row['speedup_vs_plain']:.2f}{paired}"
        f" MAL {row['mean_acceptance_length']:.2f} ttft {row['ours_mean_ttft_s']:.2f}s"
        f" lossless={row['lossless']}{differences(row)}",
        flush=True,
    )


def differences(row: dict) -> str:
    """Where rows differ from mlx_lm.generate: the reference's logit margins there (near-ties
    that batched kernels can flip are a rounding step or two wide), and the plain runs' check."""
    text = ""
    if row.get("mismatches"):
        text += f" (margins {sorted(m['margin'] for m in row['mismatches'])})"
    if row.get("plain_lossless") is False:
        margins = sorted(m["margin"] for m in row["plain_mismatches"])
        text += f" plain lossless=False (margins {margins})"
    return text
