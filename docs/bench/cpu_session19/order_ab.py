"""Session 19: the long-prompt benchmark (default config: paced, sharing the decode step) with
the scheduler's prompt order of session 18 (oldest first) and of session 19 (fewest tokens left
first), alternated in one process. Run: PYTHONPATH=. python THIS OUT.json [turns]."""

from __future__ import annotations

import asyncio
import json
import sys

import engine  # noqa: F401  (before mlx)
from engine.bench import long_prompt
from engine.core.scheduler import Scheduler
from engine.core.step_plan import PrefillChunk

NEW = Scheduler._prefill_chunks


def oldest_first(self) -> list[PrefillChunk]:
    """Session 18's order (705b02c), verbatim but for the names."""
    decoding = bool(self.running)
    budget, chunks = self.pacer.budget(decoding=decoding), []
    for state in self.prefilling:
        if len(chunks) >= self.config.max_batch or budget <= 0:
            break
        todo = len(state.prompt) - 1 - state.prefilled
        if todo > 0 and state.cache_ready:
            n, pad = self.pacer.fit(min(todo, budget), decoding=decoding, ends_prompt=todo <= budget)
            chunks.append(PrefillChunk(state, n, pad))
            budget -= n + pad
    return chunks


def measure_once() -> dict:
    """One turn of the long-prompt benchmark's default config (also min_chunk_ab.py's)."""
    return asyncio.run(
        long_prompt.measure(
            None,
            long_tokens=2048,
            running=3,
            prefill_chunk=None,
            settle_tokens=5,
            gap_factor=3.0,
            repeats=1,
        )
    )


def one(order) -> dict:
    Scheduler._prefill_chunks = order
    return measure_once()


KEYS = (
    "gap_ratio",
    "ttft_ratio",
    "chat_turn_wait_max_with_long_prompt_s",
    "chat_turn_wait_max_without_s",
    "chat_turns_with_long_prompt",
    "long_prompt_ttft_alone_s",
    "long_prompt_ttft_beside_chats_s",
    "decode_step_median_ms",
)

if __name__ == "__main__":
    turns = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    rows = []
    for turn in range(turns):
        for name, order in (("oldest_first", oldest_first), ("fewest_left_first", NEW)):
            row = one(order)
            rows.append({"order": name, "turn": turn, **{k: row[k] for k in KEYS}})
            print(rows[-1], flush=True)
            with open(sys.argv[1], "w") as f:
                json.dump({"command": " ".join(sys.argv), "rows": rows}, f, indent=1)
