"""The rungs of `python -m engine.bench.profile_ladder`: the same decode step (and verify round)
timed from mlx-lm's bare loops up to our engine, each returning milliseconds per step (round)
and what else it measured. Every rung decodes `tokens` steps after `DEFAULT_WARM` untimed ones.
"""

from __future__ import annotations

import random
import time
from dataclasses import replace
from typing import Any

import mlx.core as mx
from mlx_lm.generate import BatchGenerator, generate_step
from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

from engine.bench.baselines import run_ours
from engine.bench.profile_round import prefilled_batch
from engine.bench.spec_configs import take_timing
from engine.core.step_timing import StepTiming
from engine.requests import (
    ErrorEvent,
    GenerationRequest,
    SpecMethod,
    SpeculativeParams,
    TokenEvent,
)
from engine.sampling import greedy_tokens
from engine.speculative.rollback import rollback_rows

DEFAULT_WARM = 3  # untimed steps first: pipelines fill, kernels and graphs get built
DEFAULT_K = 4  # draft tokens per verify round
DEFAULT_ACCEPTANCE = 0.9  # per draft token, in the simulated and synthetic rounds
DEFAULT_BATCHGEN_STEP = 512


def prompts_for(batch: int, context: int, *, ragged: bool = False, seed: int = 0) -> list:
    """`batch` distinct prompts of `context` tokens (ragged: up to 6 fewer, as rows of a batch
    that need left padding)."""
    rng = random.Random(seed)
    lengths = [context - (b % 7 if ragged else 0) for b in range(batch)]
    return [[rng.randrange(100, 32000) for _ in range(n)] for n in lengths]


def _argmax(logits: mx.array) -> mx.array:
    return mx.argmax(logits[:, -1, :], axis=-1)


def _pipelined(model: Any, cache: list, first: mx.array, tokens: int) -> float:
    """Greedy decode with the next forward queued before this one's tokens are read (as
    mlx-lm's generate_step); ms per step over the timed steps."""
    nxt = _argmax(model(first[:, None], cache=cache))
    mx.async_eval(nxt)
    start = 0.0
    for i in range(tokens + DEFAULT_WARM):
        if i == DEFAULT_WARM:
            start = time.perf_counter()
        y = nxt
        nxt = _argmax(model(y[:, None], cache=cache))
        mx.async_eval(nxt)
        y.tolist()
    nxt.tolist()
    return 1e3 * (time.perf_counter() - start) / tokens


def _last_tokens(prompts: list) -> mx.array:
    return mx.array([p[-1] for p in prompts], dtype=mx.uint32)


# -- plain steps -----------------------------------------------------------------------------


def bare_generate(model: Any, prompts: list, tokens: int) -> dict:
    """mlx-lm's generate_step (greedy, one row): the single-stream bar."""
    gen = generate_step(mx.array(prompts[0]), model, max_tokens=tokens + DEFAULT_WARM + 1)
    start = 0.0
    for i, _ in enumerate(gen):
        if i == DEFAULT_WARM:
            start = time.perf_counter()
    return {"ms": 1e3 * (time.perf_counter() - start) / tokens}


def bare_batchgen(model: Any, prompts: list, tokens: int) -> dict:
    """mlx-lm's BatchGenerator over the batch (no stop tokens): ms per generated step."""
    gen = BatchGenerator(
        model, stop_tokens=[], completion_batch_size=max(32, len(prompts)),
        prefill_step_size=DEFAULT_BATCHGEN_STEP,
    )  # fmt: skip
    gen.insert(prompts, [tokens + DEFAULT_WARM + 1] * len(prompts))
    steps, start = 0, 0.0
    while responses := gen.next_generated():
        if steps == DEFAULT_WARM:
            start = time.perf_counter()
        steps += 1
        if all(r.finish_reason is not None for r in responses):
            break
    ms = 1e3 * (time.perf_counter() - start) / max(steps - DEFAULT_WARM, 1)
    gen.close()
    return {"ms": ms, "steps": steps - DEFAULT_WARM}


def bare_forward(model: Any, prompts: list, tokens: int) -> dict:
    """Forward + argmax over mlx-lm's plain KVCache, all rows one length (no mask)."""
    cache = make_prompt_cache(model)
    mx.eval(model(mx.array([p[:-1] for p in prompts]), cache=cache))
    return {"ms": _pipelined(model, cache, _last_tokens(prompts), tokens)}


def batch_cache(model: Any, prompts: list, tokens: int, *, ours: bool) -> dict:
    """The same loop over a batch cache: mlx-lm's BatchKVCache (a mask every step) or our
    RaggedBatchKVCache (a mask only where rows differ in length)."""
    cache = prefilled_batch(model, [p[:-1] for p in prompts], ours=ours)
    return {"ms": _pipelined(model, cache, _last_tokens(prompts), tokens)}


# -- verify rounds ---------------------------------------------------------------------------


def _accepted(rng: random.Random, k: int) -> int:
    n = 0
    while n < k and rng.random() < DEFAULT_ACCEPTANCE:
        n += 1
    return n


def _verify_rounds(model: Any, cache: list, prompts: list, rounds: int, rollback) -> float:
    """Rounds of: one forward of width k+1 per row, read back the greedy tokens, give back
    what was not accepted (`rollback(surplus)`). ms per round over the timed rounds."""
    rng = random.Random(0)
    x = mx.array([[p[-1]] * (DEFAULT_K + 1) for p in prompts], dtype=mx.uint32)
    start = 0.0
    for i in range(rounds + DEFAULT_WARM):
        if i == DEFAULT_WARM:
            start = time.perf_counter()
        greedy_tokens(model(x, cache=cache))
        rollback([DEFAULT_K - _accepted(rng, DEFAULT_K) for _ in prompts])
    return 1e3 * (time.perf_counter() - start) / rounds


def bare_verify(model: Any, prompts: list, rounds: int) -> dict:
    """Verify forwards over mlx-lm's plain KVCache, which trims all rows alike (by the least
    surplus: rows keep a few rejected positions, which only a timing can ignore)."""
    cache = make_prompt_cache(model)
    mx.eval(model(mx.array([p[:-1] for p in prompts]), cache=cache))
    ms = _verify_rounds(model, cache, prompts, rounds, lambda s: trim_prompt_cache(cache, min(s)))
    return {"ms": ms}


def ours_verify(model: Any, prompts: list, rounds: int) -> dict:
    """Verify forwards over our RaggedBatchKVCache with per-row rollback (holes, compaction)."""
    cache = prefilled_batch(model, [p[:-1] for p in prompts], ours=True)
    return {"ms": _verify_rounds(model, cache, prompts, rounds, lambda s: rollback_rows(cache, s))}


# -- our engine ------------------------------------------------------------------------------


def reply_tokens(tokens: int, *, verify: bool) -> int:
    """max_tokens of an engine run: enough for `tokens` timed steps, or rounds (each round
    gives up to k+1 tokens)."""
    return (tokens + DEFAULT_WARM) * (DEFAULT_K + 1 if verify else 1)


def synthetic_params() -> SpeculativeParams:
    return SpeculativeParams(method=SpecMethod.SYNTHETIC, draft_tokens=DEFAULT_K)


def engine_replies(core: Any, prompts: list, max_tokens: int) -> list[list[int]]:
    """The greedy replies our EngineCore gives these prompts (run together, no speculation)."""
    ids = []
    for p in prompts:
        request = GenerationRequest(prompt_tokens=p, max_tokens=max_tokens)
        ids.append(request.request_id)
        core.add(request)
    replies: dict[str, list[int]] = {rid: [] for rid in ids}
    while core.has_work():
        for event in core.step():
            if isinstance(event, ErrorEvent):
                raise RuntimeError(event.message)
            if isinstance(event, TokenEvent):
                replies[event.request_id].extend(event.token_ids)
    return [replies[rid] for rid in ids]


def engine_core(
    core: Any, prompts: list, tokens: int, *, verify: bool = False, ahead: bool = False
) -> dict:
    """EngineCore stepping the rows to completion, no asyncio: wall ms of each core.step()
    while all rows decode (plain steps, or verify rounds with `verify`; queued ahead with
    `ahead`, else in series). The core's config must prefill every prompt in one step, so
    that all rows join at once."""
    core.executor.ahead.on = ahead
    spec = synthetic_params() if verify else SpeculativeParams()
    for p in prompts:
        core.add(
            GenerationRequest(
                prompt_tokens=p, max_tokens=reply_tokens(tokens, verify=verify), speculative=spec
            )
        )
    executor, scheduler = core.executor, core.scheduler
    scheduler.timing = StepTiming()  # this run's parts only
    plain: list[float] = []
    rounds: list[float] = []
    emitted = 0
    while core.has_work():
        decoding = len(executor.batch) == len(prompts) and not executor.prefilling
        before = replace(scheduler.timing)
        start = time.perf_counter()
        events = core.step()
        elapsed = time.perf_counter() - start
        for event in events:
            if isinstance(event, ErrorEvent):
                raise RuntimeError(event.message)
            if isinstance(event, TokenEvent):
                emitted += len(event.token_ids)
        if not decoding:
            continue
        if scheduler.timing.verify_rounds > before.verify_rounds:
            rounds.append(elapsed)
        elif scheduler.timing.plain_steps > before.plain_steps:
            plain.append(elapsed)
    timed = (rounds if verify else plain)[DEFAULT_WARM:]
    if not timed:
        raise RuntimeError(f"no {'verify round' if verify else 'plain step'} while all rows ran")
    return {
        "ms": 1e3 * sum(timed) / len(timed),
        "steps": len(timed),
        "plain_steps": len(plain),
        "verify_rounds": len(rounds),
        "tokens_per_round": round(emitted / max(len(prompts), 1) / max(len(rounds), 1), 2)
        if verify
        else None,
        "step_timing_ms": scheduler.timing.per_round_ms(),
    }


async def engine_api(eng: Any, prompts: list, tokens: int, *, verify: bool = False) -> dict:
    """The full Engine through engine.api (asyncio): the time from the first row's first token
    to the end, over the decode steps (plain steps and verify rounds) the engine counted."""
    await take_timing(eng)
    spec = synthetic_params() if verify else None
    run = await run_ours(eng, prompts, reply_tokens(tokens, verify=verify), speculative=spec)
    timing = await take_timing(eng)
    steps = timing.plain_steps + timing.verify_rounds
    if not steps:
        raise RuntimeError("the engine counted no decode steps")
    return {
        "ms": 1e3 * (run.wall_s - min(run.ttft_s)) / steps,
        "tokens_per_s": round(run.tokens_per_s, 2),
        "plain_steps": timing.plain_steps,
        "verify_rounds": timing.verify_rounds,
        "ttft_spread_ms": round(1e3 * (max(run.ttft_s) - min(run.ttft_s)), 2),
        "step_timing_ms": timing.per_round_ms(),
    }
