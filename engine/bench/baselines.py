"""The runs the benchmark compares: mlx-lm's BatchGenerator, mlx-lm alone (the exactness
reference), and our engine through its public API."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
from mlx_lm.generate import BatchGenerator, stream_generate

from engine.api import Engine
from engine.core.step_timing import StepTiming
from engine.requests import (
    ErrorEvent,
    FinishedEvent,
    GenerationRequest,
    SpecStats,
    SpeculativeParams,
    TokenEvent,
)

DEFAULT_PREFILL_STEP = 512
DEFAULT_BG_PREFILL_BATCH = 8  # BatchGenerator's own default


@dataclass
class RunResult:
    tokens: list[list[int]]
    wall_s: float
    ttft_s: list[float]
    spec: SpecStats = field(default_factory=SpecStats)
    timing: StepTiming = field(default_factory=StepTiming)

    @property
    def generated(self) -> int:
        return sum(len(t) for t in self.tokens)

    @property
    def tokens_per_s(self) -> float:
        return self.generated / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def mean_ttft_s(self) -> float:
        return sum(self.ttft_s) / len(self.ttft_s) if self.ttft_s else 0.0


def reference_tokens(model: Any, tokenizer: Any, prompt: list[int], max_tokens: int) -> list[int]:
    """What mlx_lm.generate produces for this prompt alone (greedy), without the EOS token."""
    out = []
    for r in stream_generate(
        model, tokenizer, prompt, max_tokens=max_tokens, prefill_step_size=DEFAULT_PREFILL_STEP
    ):
        if r.finish_reason == "stop" and r.token in tokenizer.eos_token_ids:
            break
        out.append(r.token)
    return out


def run_single_stream(
    model: Any, tokenizer: Any, prompts: list[list[int]], max_tokens: int
) -> RunResult:
    """mlx_lm.generate on each prompt in turn (its `stream_generate`): the bar for one chat."""
    return _one_at_a_time(
        prompts,
        lambda p: stream_generate(
            model, tokenizer, p, max_tokens=max_tokens, prefill_step_size=DEFAULT_PREFILL_STEP
        ),
        tokenizer,
    )


def _one_at_a_time(
    prompts: list[list[int]], stream: Callable[[list[int]], Iterable[Any]], tokenizer: Any
) -> RunResult:
    """Run `stream(prompt)` for each prompt in turn; TTFT from each prompt's own start."""
    start = time.perf_counter()
    outs: list[list[int]] = []
    ttfts: list[float] = []
    for prompt in prompts:
        began = time.perf_counter()
        out: list[int] = []
        first = None
        for r in stream(prompt):
            first = first if first is not None else time.perf_counter() - began
            if r.finish_reason == "stop" and r.token in tokenizer.eos_token_ids:
                break
            out.append(r.token)
        outs.append(out)
        ttfts.append(first or 0.0)
    return RunResult(outs, time.perf_counter() - start, ttfts)


def run_mlx_lm_speculative(
    model: Any, draft: Any, tokenizer: Any, prompts: list[list[int]], max_tokens: int, k: int
) -> RunResult:
    """mlx-lm's own speculative decoding (one request at a time: it cannot batch)."""
    return _one_at_a_time(
        prompts,
        lambda p: stream_generate(
            model, tokenizer, p, max_tokens=max_tokens, draft_model=draft, num_draft_tokens=k
        ),
        tokenizer,
    )


def batch_generator(
    model: Any, tokenizer: Any, rows: int, *, slots: int | None = None
) -> BatchGenerator:
    """mlx-lm's BatchGenerator as the benchmark runs it, for `rows` prompts, `slots` at a time
    (None: all at once)."""
    return BatchGenerator(
        model,
        stop_tokens=[[t] for t in tokenizer.eos_token_ids],
        # it raises completion_batch_size to at least prefill_batch_size
        completion_batch_size=slots or max(32, rows),
        prefill_batch_size=min(DEFAULT_BG_PREFILL_BATCH, slots or DEFAULT_BG_PREFILL_BATCH),
        prefill_step_size=DEFAULT_PREFILL_STEP,
    )


def run_batch_generator(
    model: Any,
    tokenizer: Any,
    prompts: list[list[int]],
    max_tokens: int,
    *,
    slots: int | None = None,
) -> RunResult:
    """mlx-lm's continuous batching, as `mlx_lm.batch_generate` drives it (`slots` rows at a
    time; None: all at once)."""
    start = time.perf_counter()
    gen = batch_generator(model, tokenizer, len(prompts), slots=slots)
    uids = gen.insert(prompts, [max_tokens] * len(prompts))
    tokens = {uid: [] for uid in uids}
    first: dict[int, float] = {}
    while responses := gen.next_generated():
        now = time.perf_counter()
        for r in responses:
            first.setdefault(r.uid, now - start)
            if r.finish_reason != "stop":
                tokens[r.uid].append(r.token)
    gen.close()
    wall = time.perf_counter() - start
    return RunResult([tokens[u] for u in uids], wall, [first[u] for u in uids])


async def run_ours(
    engine: Engine,
    prompts: list[list[int]],
    max_tokens: int,
    *,
    speculative: SpeculativeParams | list[SpeculativeParams] | None = None,
    model: str | None = None,
    slots: int | None = None,
) -> RunResult:
    """Our engine through its public API (on `model`; None: the engine's default model), all
    requests submitted at once, or `slots` at a time: the next starts when one finishes. TTFT
    counts from each request's own submission."""
    start = time.perf_counter()
    specs = speculative if isinstance(speculative, list) else [speculative] * len(prompts)
    totals = SpecStats()
    gate = asyncio.Semaphore(slots or max(1, len(prompts)))

    async def one(prompt: list[int], spec: SpeculativeParams | None) -> tuple[list[int], float]:
        async with gate:
            return await submit(prompt, spec)

    async def submit(prompt: list[int], spec: SpeculativeParams | None) -> tuple[list[int], float]:
        tokens: list[int] = []
        first = None
        began = time.perf_counter()
        request = GenerationRequest(
            prompt_tokens=prompt,
            max_tokens=max_tokens,
            speculative=spec or SpeculativeParams(),
            model=model,
        )
        async for event in engine.submit(request):
            if isinstance(event, TokenEvent) and event.token_ids and first is None:
                first = time.perf_counter() - began
            if isinstance(event, TokenEvent):
                tokens.extend(event.token_ids)
            elif isinstance(event, FinishedEvent):
                totals.add(event.stats.spec)
            elif isinstance(event, ErrorEvent):
                raise RuntimeError(event.message)
        return tokens, first if first is not None else time.perf_counter() - began

    results = await asyncio.gather(*(one(p, s) for p, s in zip(prompts, specs)))
    wall = time.perf_counter() - start
    return RunResult([r[0] for r in results], wall, [r[1] for r in results], totals)


def mismatches(
    model: Any, prompts: list[list[int]], expected: list[list[int]], runs: list[RunResult]
) -> list[dict]:
    """Rows whose tokens differ from `expected`: where they first differ and the reference's
    margin there (its top logit minus the runner-up). A margin of a rounding step or two is a
    near-tie that batched GPU kernels can flip (plain decoding too); a large one is a bug."""
    found = []
    for run in runs:
        for row, (prompt, want, got) in enumerate(zip(prompts, expected, run.tokens)):
            if got == want:
                continue
            at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
            if at is None:
                at = min(len(got), len(want))
            logits = model(mx.array(prompt + want[:at])[None])[0, -1].astype(mx.float32)
            top = mx.sort(logits)[-2:]
            found.append({"row": row, "at": at, "margin": round(float(top[1] - top[0]), 5)})
    return found


def paired_ratio(ours: list[float], theirs: list[float]) -> float | None:
    """The median of run-by-run ratios (ours[i] / theirs[i], the runs alternated): a host that
    switches speed between runs moves both sides of a pair alike, where a ratio of medians
    compares runs made at different speeds."""
    pairs = [a / b for a, b in zip(ours, theirs) if b > 0]
    return round(statistics.median(pairs), 3) if pairs else None


def add_single_stream(row: dict, single_runs: list[RunResult], plain: float) -> None:
    """At concurrency 1: mlx_lm.generate alone on the same prompt, and our plain decoding and
    this row against it."""
    single = statistics.median(r.tokens_per_s for r in single_runs) if single_runs else None
    row["single_stream_tokens_per_s"] = round(single, 2) if single else None
    row["ratio_vs_single_stream"] = round(row["ours_tokens_per_s"] / single, 3) if single else None
    row["plain_ratio_vs_single_stream"] = round(plain / single, 3) if single else None
    theirs = [r.tokens_per_s for r in single_runs]
    row["single_stream_runs_tokens_per_s"] = [round(t, 2) for t in theirs]
    row["ratio_vs_single_stream_paired"] = paired_ratio(row["ours_runs_tokens_per_s"], theirs)
