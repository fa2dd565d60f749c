"""Where a long prompt's time to first token goes beside three chats (CPU, default model): every
engine step of one busy turn with its start, wall time, prompt tokens and decode rows, against the
long prompt's submit and first-token times. Session 19. Run: PYTHONPATH=. python THIS [json]."""

from __future__ import annotations

import asyncio
import json
import sys
import time

import engine  # noqa: F401  (before mlx)
from engine.api import Engine, EngineConfig
from engine.bench import long_prompt as lp
from engine.bench.multiturn import history
from engine.bench.workloads import CHAT_QUESTIONS, prompt_ids


async def main(out: str | None) -> None:
    config = EngineConfig(prompt_cache=False, log_blas=False, stream_interval_s=0.0)
    eng = Engine(config)
    eng.start()
    await eng.wait_ready()
    core = await eng.run_on_engine_thread(lambda: eng._worker.core_for())
    tok = core.target.tokenizer
    long_prompt = prompt_ids(tok, history(tok, 2048))[:2048]
    chats = [prompt_ids(tok, [{"role": "user", "content": q}]) for q in CHAT_QUESTIONS[:3]]
    steps: list[list] = []
    inner = core.step

    def traced():
        plan_rows = len(core.scheduler.running)
        prefilling = [(s.request_id, s.prefilled) for s in core.scheduler.prefilling]
        t = time.perf_counter()
        events = inner()
        steps.append([t, time.perf_counter() - t, plan_rows, prefilling])
        return events

    core.step = traced
    await lp._first_token(eng, long_prompt[:64])
    _, _, alone = await lp._first_token(eng, long_prompt)
    slots = [[] for _ in chats]
    sent = [[] for _ in chats]
    tasks = [
        asyncio.create_task(lp._chat(eng, p, 2000, s, t)) for p, s, t in zip(chats, slots, sent)
    ]
    while min(sum(len(t) for t in s) for s in slots) < 8:
        await asyncio.sleep(0.01)
    steps.clear()
    start, first, ttft = await lp._first_token(eng, long_prompt)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await eng.stop()
    inside = [s for s in steps if start <= s[0] <= first]
    gaps = sorted(g for slot in slots for t in slot for g in lp._gaps(t, start, first))
    busy = sum(s[1] for s in inside)
    with_prompt = [s for s in inside if s[3]]
    report = {
        "alone_s": round(alone, 3),
        "ttft_s": round(ttft, 3),
        "steps": len(inside),
        "steps_s": round(busy, 3),
        "outside_steps_s": round(ttft - busy, 3),
        "steps_with_prompt": len(with_prompt),
        "steps_with_prompt_s": round(sum(s[1] for s in with_prompt), 3),
        "decode_only_steps": len(inside) - len(with_prompt),
        "decode_only_s": round(sum(s[1] for s in inside if not s[3]), 3),
        "gap_p99_s": round(lp.p99(gaps), 3),
        "gap_max_s": round(gaps[-1], 3) if gaps else None,
        "turn_waits_s": [
            round(w, 3) for slot, t in zip(slots, sent) for w in lp._turn_waits(slot, t, start, first)
        ],
        "trace": [[round(s[0] - start, 4), round(1e3 * s[1], 2), s[2], s[3]] for s in inside],
    }
    print({k: v for k, v in report.items() if k != "trace"})
    if out:
        with open(out, "w") as f:
            json.dump(report, f)


asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))
