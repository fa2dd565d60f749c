"""`python -m engine.bench --workload long-prompt`: does a long prompt stall the chats that are
running? Three chats decode; a long prompt arrives; the running chats' gaps between tokens while
it is prefilled (p99) against their gaps without it, and the long prompt's time to first token
against prefilling it alone. Both in one process, in turn (`--repeats` turns, each ratio taken
within its turn, medians reported), so the ratios survive a noisy machine.

The gaps are the engine's own: tokens reach the benchmark as each step makes them
(`stream_interval_s=0`), not in the app's batches of a few steps, which would hide a stall shorter
than the batch and make the gap without the long prompt the batch's length. One untimed pass
first builds what a process builds once (on CUDA a graph per new forward length).

With `speculative` every request drafts (a draft model's rows catch up on their history inside
the running batch's verify rounds): the long prompt then runs on for a few tokens, and the window
whose gaps count lasts until its reply ends, so its draft's catch-up falls inside it."""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from engine.api import Engine, EngineConfig
from engine.bench.multiturn import history
from engine.bench.workloads import CHAT_QUESTIONS, prompt_ids
from engine.config import DEFAULT_PREFILL_GAP_FACTOR
from engine.core.prefill_pacer import PacedStep
from engine.requests import (
    ErrorEvent,
    GenerationRequest,
    SpecMethod,
    SpeculativeParams,
    TokenEvent,
)

DEFAULT_LONG_TOKENS = 2048
DEFAULT_RUNNING = 3
DEFAULT_CHAT_TOKENS = 2000
DEFAULT_FOLLOW_TOKENS = 24  # the long prompt's reply when speculating: its draft catches up
# (gap factor, prompt chunks share the decode step's forward): now, before sharing, before pacing
DEFAULT_CONFIGS = (
    (DEFAULT_PREFILL_GAP_FACTOR, True),
    (DEFAULT_PREFILL_GAP_FACTOR, False),
    (None, True),
)


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] if ordered else 0.0


async def _chat(
    engine: Engine,
    prompt: list[int],
    max_tokens: int,
    replies: list[list[float]],
    submitted: list[float],
    speculative: SpeculativeParams,
) -> None:
    """One chat slot, kept busy until cancelled: a reply that ends is followed by another.
    Each reply's token times are a list of their own (the gap to the next reply's first token
    is its prompt's processing: measured apart, as the turn's wait in `_turn_waits`), and
    `submitted` gets the time each was sent."""
    while True:
        times: list[float] = []
        replies.append(times)
        submitted.append(time.perf_counter())
        request = GenerationRequest(
            prompt_tokens=prompt, max_tokens=max_tokens, speculative=speculative
        )
        async for event in engine.submit(request):
            if isinstance(event, TokenEvent) and event.token_ids:
                times.append(time.perf_counter())
            elif isinstance(event, ErrorEvent):
                raise RuntimeError(event.message)


async def _first_token(
    engine: Engine,
    prompt: list[int],
    *,
    max_tokens: int = 1,
    speculative: SpeculativeParams | None = None,
) -> tuple[float, float, float]:
    """(submitted at, its reply's end, seconds to its first token)."""
    start = time.perf_counter()
    times: list[float] = []
    request = GenerationRequest(
        prompt_tokens=prompt,
        max_tokens=max_tokens,
        speculative=speculative or SpeculativeParams(),
    )
    async for event in engine.submit(request):
        if isinstance(event, TokenEvent) and event.token_ids:
            times.append(time.perf_counter())
        elif isinstance(event, ErrorEvent):
            raise RuntimeError(event.message)
    return start, times[-1], times[0] - start


def _gaps(times: list[float], start: float, end: float) -> list[float]:
    return [b - a for a, b in zip(times, times[1:]) if b > start and a < end]


def _turn_waits(
    replies: list[list[float]], submitted: list[float], start: float, end: float
) -> list[float]:
    """How long each chat turn sent within [start, end) waited for its first token; one still
    waiting at `end` counts what it had waited by then. A chat's next message must not wait
    behind the long prompt: a gap between replies is a stall as much as one within a reply."""
    return [
        (times[0] if times else end) - sent
        for times, sent in zip(replies, submitted)
        if start <= sent < end
    ]


async def measure(
    model: str | None,
    *,
    long_tokens: int,
    running: int,
    prefill_chunk: int | None,
    settle_tokens: int,
    gap_factor: float | None,
    packed: bool = True,
    pow2: bool | None = None,
    repeats: int = 1,
    speculative: SpeculativeParams | None = None,
    draft_model: str | None = None,
) -> dict[str, Any]:
    """The long prompt alone, the chats without it and the chats beside it, in turn `repeats`
    times after one untimed pass; each ratio is taken within one turn and the medians
    reported. `speculative`: every request drafts so (see above)."""
    spec = speculative or SpeculativeParams()
    method = SpecMethod(spec.method)
    follow = 1 if method == SpecMethod.OFF else DEFAULT_FOLLOW_TOKENS
    config = EngineConfig(
        model=model,
        draft_model=draft_model,
        prefill_chunk=prefill_chunk,
        prefill_gap_factor=gap_factor,
        prefill_pow2=pow2,
        packed_prefill=packed,
        prompt_cache=False,
        log_blas=False,
        stream_interval_s=0.0,
    )
    engine = Engine(config)
    engine.start()
    await engine.wait_ready()
    tokenizer = await engine.run_on_engine_thread(
        lambda: engine._worker.core_for().target.tokenizer
    )
    long_prompt = prompt_ids(tokenizer, history(tokenizer, long_tokens))[:long_tokens]
    chats = [
        prompt_ids(tokenizer, [{"role": "user", "content": q}]) for q in CHAT_QUESTIONS[:running]
    ]
    await _first_token(engine, long_prompt[:64])  # warm-up

    async def gaps_with(long: bool) -> tuple[list[float], list[float], float | None]:
        slots: list[list[list[float]]] = [[] for _ in chats]
        sent: list[list[float]] = [[] for _ in chats]
        budget = DEFAULT_CHAT_TOKENS
        tasks = [
            asyncio.create_task(_chat(engine, p, budget, s, t, spec))
            for p, s, t in zip(chats, slots, sent)
        ]

        async def until(count: int) -> None:
            while min(sum(len(t) for t in slot) for slot in slots) < count:
                for task in tasks:
                    if task.done():
                        task.result()  # a failed chat says why
                await asyncio.sleep(0.01)

        await until(settle_tokens)  # all running, past their prefill
        ttft = None
        if long:
            start, end, ttft = await _first_token(
                engine, long_prompt, max_tokens=follow, speculative=spec
            )
        else:
            start = time.perf_counter()
            await until(3 * settle_tokens)
            end = time.perf_counter()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        gaps = [g for slot in slots for t in slot for g in _gaps(t, start, end)]
        waits = [w for slot, t in zip(slots, sent) for w in _turn_waits(slot, t, start, end)]
        return gaps, waits, ttft

    await gaps_with(True)  # warm-up: the shapes a paced prompt goes through
    pacer = await engine.run_on_engine_thread(lambda: engine._worker.core_for().scheduler.pacer)
    turns: list[dict[str, Any]] = []
    for _ in range(max(repeats, 1)):
        _, _, alone = await _first_token(engine, long_prompt)
        quiet, quiet_waits, _ = await gaps_with(False)
        trace: list[PacedStep] = []  # each turn's steps beside the chats
        await engine.run_on_engine_thread(lambda traced=trace: setattr(pacer, "trace", traced))
        busy, busy_waits, ttft = await gaps_with(True)
        await engine.run_on_engine_thread(lambda: setattr(pacer, "trace", None))
        ttft = ttft or 0.0
        turns.append(
            dict(
                quiet=quiet,
                busy=busy,
                quiet_waits=quiet_waits,
                busy_waits=busy_waits,
                alone=alone,
                ttft=ttft,
                gap=p99(busy) / p99(quiet),
                steps=[s for s in trace if s.prefill_tokens > 0 and s.decoding],
                joins=[s for s in trace if s.joined and s.decoding],
                decode=[s.seconds for s in trace if s.decoding and not s.prefill_tokens],
                catch_ups=[s for s in trace if s.catch_up_s > 0],
            )
        )
    timing = await engine.run_on_engine_thread(lambda: engine._worker.core_for().scheduler.timing)
    prompt_steps, decode_steps = turns[-1]["steps"], turns[-1]["decode"]
    await engine.stop()
    return {
        "workload": "long-prompt",
        "long_prompt_tokens": len(long_prompt),
        "running_chats": running,
        "prefill_chunk": config.step_prefill_chunk(),
        "prefill_gap_factor": gap_factor,
        "packed_prefill": packed,
        "repeats": len(turns),
        "speculative": method.value,
        "draft_model": draft_model,
        "long_prompt_reply_tokens": follow,
        "gap_p99_without_s": round(statistics.median(p99(t["quiet"]) for t in turns), 4),
        "gap_median_without_s": round(
            statistics.median(statistics.median(t["quiet"]) for t in turns), 4
        ),
        "gap_p99_with_long_prompt_s": round(statistics.median(p99(t["busy"]) for t in turns), 4),
        "gap_ratio": round(statistics.median(t["gap"] for t in turns), 3),
        "gap_ratio_runs": [round(t["gap"], 3) for t in turns],
        # chat turns sent while the long prompt was processed (or in the window without it): the
        # longest wait for their first token in each turn, None where no chat's reply ended then
        "chat_turn_wait_max_without_s": _longest(turns, "quiet_waits"),
        "chat_turn_wait_max_with_long_prompt_s": _longest(turns, "busy_waits"),
        "chat_turns_with_long_prompt": sum(len(t["busy_waits"]) for t in turns),
        "long_prompt_ttft_alone_s": round(statistics.median(t["alone"] for t in turns), 3),
        "long_prompt_ttft_beside_chats_s": round(statistics.median(t["ttft"] for t in turns), 3),
        "ttft_ratio": round(statistics.median(t["ttft"] / t["alone"] for t in turns), 3),
        "ttft_ratio_runs": [round(t["ttft"] / t["alone"], 3) for t in turns],
        # over the engine's life (every long prompt of the run): steps whose forward carried a chunk
        "shared_steps": timing.shared_steps,
        "shared_prompt_tokens": timing.shared_tokens,
        "pow2_chunks": pacer.pow2,
        # the last turn's steps with prompt tokens beside the chats: (tokens, ms) each
        "prompt_steps": [[s.prefill_tokens, round(1e3 * s.seconds, 2)] for s in prompt_steps],
        # each turn's steps that joined a row to the running batch (the long prompt's, once its
        # prompt was done): (rows joined, prompt tokens, ms) each; the chats' gap counts them too
        "join_steps_runs": [
            [[s.joined, s.prefill_tokens, round(1e3 * s.seconds, 2)] for s in t["joins"]]
            for t in turns
        ],
        # every turn's, in order (how the pacer's chunks moved from one prompt to the next)
        "prompt_steps_runs": [
            [[s.prefill_tokens, round(1e3 * s.seconds, 2)] for s in t["steps"]] for t in turns
        ],
        # that turn's steps that only decoded (the engine's own time, not the gap between tokens)
        "decode_step_median_ms": round(1e3 * statistics.median(decode_steps), 2)
        if decode_steps
        else None,
        # each turn's steps in which a draft model caught up on a new row's history (the long
        # prompt's, when speculating): (ms catching up, ms the rest of the step) each
        "catch_up_steps_runs": [
            [[round(1e3 * s.catch_up_s, 2), round(1e3 * s.seconds, 2)] for s in t["catch_ups"]]
            for t in turns
        ],
    }


def _longest(turns: list[dict[str, Any]], key: str) -> float | None:
    """The median over turns of each turn's longest wait (None: no turn had one)."""
    longest = [max(t[key]) for t in turns if t[key]]
    return round(statistics.median(longest), 3) if longest else None


def run_sync(
    model: str | None,
    *,
    long_tokens: int,
    prefill_chunk: int | None,
    repeats: int = 1,
    speculative: SpeculativeParams | None = None,
    draft_model: str | None = None,
) -> list[dict[str, Any]]:
    """Paced prefill sharing the decode step's forward (the default), paced in forwards of its
    own (before it), and whole chunks (before the pacer), one after the other."""
    return [
        asyncio.run(
            measure(
                model,
                long_tokens=long_tokens,
                running=DEFAULT_RUNNING,
                prefill_chunk=prefill_chunk,
                settle_tokens=5,
                gap_factor=factor,
                packed=packed,
                repeats=repeats,
                speculative=speculative,
                draft_model=draft_model,
            )
        )
        for factor, packed in DEFAULT_CONFIGS
    ]


def print_long_prompt(row: dict[str, Any]) -> None:
    spec = row.get("speculative", SpecMethod.OFF.value)
    drafting = "" if spec == SpecMethod.OFF.value else f", every request drafting ({spec})"
    print(
        f"gap factor {row['prefill_gap_factor']}, shared forward {row.get('packed_prefill')}: long prompt {row['long_prompt_tokens']} tokens beside {row['running_chats']} chats{drafting}: "
        f"p99 gap {row['gap_p99_with_long_prompt_s']:.3f}s vs {row['gap_p99_without_s']:.3f}s "
        f"(x{row['gap_ratio']}); first token {row['long_prompt_ttft_beside_chats_s']:.2f}s vs "
        f"{row['long_prompt_ttft_alone_s']:.2f}s alone (x{row['ttft_ratio']}); a chat's next "
        f"turn waited at most {row.get('chat_turn_wait_max_with_long_prompt_s')}s for its first "
        f"token ({row.get('chat_turn_wait_max_without_s')}s without)",
        flush=True,
    )
