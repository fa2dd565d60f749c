"""`python -m engine.bench --workload multiturn`: time to first token of a chat turn that follows
a ~1,000-token history, cold (no prompt cache), warm (the history cached in RAM by the previous
turn) and after a restart (the cache read back from disk)."""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from typing import Any

from engine.api import Engine, EngineConfig
from engine.bench.workloads import CHAT_QUESTIONS, REWRITE_TEXTS, prompt_ids
from engine.requests import ErrorEvent, GenerationRequest, TokenEvent

DEFAULT_HISTORY_TOKENS = 1000
DEFAULT_REPLY_TOKENS = 32


def history(tokenizer: Any, target_tokens: int) -> list[dict[str, str]]:
    """Earlier turns (questions and long answers) until the template holds ~target tokens."""
    messages: list[dict[str, str]] = []
    i = 0
    # at least one turn: a template cannot be applied to no messages at all
    while not messages or len(prompt_ids(tokenizer, messages)) < target_tokens:
        instruction, text = REWRITE_TEXTS[i % len(REWRITE_TEXTS)]
        messages += [
            {"role": "user", "content": f"{instruction}\n\n{text}"},
            {"role": "assistant", "content": text},
        ]
        i += 1
    return messages


async def first_token(engine: Engine, messages: list[dict[str, str]], max_tokens: int):
    """(seconds to the first token, the reply's tokens, the request's stats)."""
    start = time.perf_counter()
    ttft, tokens, stats = None, [], None
    async for event in engine.submit(GenerationRequest(messages=messages, max_tokens=max_tokens)):
        if isinstance(event, TokenEvent) and event.token_ids:
            ttft = ttft if ttft is not None else time.perf_counter() - start
            tokens += event.token_ids
        elif isinstance(event, ErrorEvent):
            raise RuntimeError(event.message)
        elif hasattr(event, "finish_reason"):
            stats = event.stats
    return ttft, tokens, stats


def _cached(model: str | None) -> EngineConfig:
    """A prompt cache in a fresh folder of its own."""
    folder = tempfile.mkdtemp(prefix="tandem-bench-cache-")
    return EngineConfig(model=model, prompt_cache_dir=folder, log_blas=False)


async def started(config: EngineConfig) -> Engine:
    engine = Engine(config)
    engine.start()
    await engine.wait_ready()
    return engine


async def run(model: str | None, tokenizer: Any, *, repeats: int, reply_tokens: int) -> dict:
    past = history(tokenizer, DEFAULT_HISTORY_TOKENS)
    asks = [{"role": "user", "content": q} for q in CHAT_QUESTIONS[:repeats]]
    cold_engine = await started(EngineConfig(model=model, prompt_cache=False, log_blas=False))
    await first_token(cold_engine, asks[:1], 4)  # warm-up
    cold, warm, disk, same, cached = [], [], [], [], []
    for ask in asks:
        # warm: the previous turn's prompt and reply are in RAM
        engine = await started(_cached(model))
        _, reply, _ = await first_token(engine, past + [ask], reply_tokens)
        turn = past + [ask, {"role": "assistant", "content": tokenizer.decode(reply)}, asks[0]]
        t_warm, warm_tokens, stats = await first_token(engine, turn, reply_tokens)
        await engine.stop()
        # disk: the previous turn ran, the app restarted (RAM empty), then this turn
        config = _cached(model)
        engine = await started(config)
        await first_token(engine, past + [ask], reply_tokens)
        await engine.stop()  # flushes the disk tier
        engine = await started(config)
        t_disk, disk_tokens, disk_stats = await first_token(engine, turn, reply_tokens)
        await engine.stop()
        t_cold, cold_tokens, cold_stats = await first_token(cold_engine, turn, reply_tokens)
        cold.append(t_cold)
        warm.append(t_warm)
        disk.append(t_disk)
        same.append(warm_tokens == cold_tokens == disk_tokens)
        cached.append((stats.cached_tokens, disk_stats.cached_tokens, cold_stats.prompt_tokens))
    await cold_engine.stop()
    c, w, d = statistics.median(cold), statistics.median(warm), statistics.median(disk)
    return {
        "concurrency": 1,
        "speculative": "off",
        "workload": "multiturn",
        "history_tokens": cached[0][2],
        "cached_tokens_warm": cached[0][0],
        "cached_tokens_disk": cached[0][1],
        "ttft_cold_s": round(c, 3),
        "ttft_warm_s": round(w, 3),
        "ttft_disk_s": round(d, 3),
        "warm_over_cold": round(w / c, 3),
        "disk_over_cold": round(d / c, 3),
        "ttft_runs_s": {"cold": cold, "warm": warm, "disk": disk},
        "lossless": all(same),
    }


def print_multiturn(row: dict) -> None:
    print(
        f"multiturn: {row['history_tokens']}-token turn, ttft cold {row['ttft_cold_s']:.3f}s "
        f"warm (RAM) {row['ttft_warm_s']:.3f}s ({row['warm_over_cold']:.1%}) "
        f"disk {row['ttft_disk_s']:.3f}s ({row['disk_over_cold']:.1%}) "
        f"cached {row['cached_tokens_warm']}/{row['cached_tokens_disk']} "
        f"same tokens={row['lossless']}",
        flush=True,
    )


def run_sync(model: str | None, tokenizer: Any, *, repeats: int, reply_tokens: int) -> dict:
    return asyncio.run(run(model, tokenizer, repeats=repeats, reply_tokens=reply_tokens))
