"""Session 20: the long-prompt benchmark with every request drafting with a draft model (the
default model drafting for itself: the dearest draft there is, a cost ratio of one), the draft's
catch-up on the long prompt in whole prefill chunks (before) and paced (after,
engine/speculative/catch_up_pacer.py), alternated in one process. With "head" as the fourth
argument the requests draft with the default model's trained draft head instead (the app's
"draft" for it; before, a new row's every position went through the head in one forward).
Run: PYTHONPATH=. python THIS OUT.json [turns] [long tokens] [head]."""

from __future__ import annotations

import asyncio
import json
import sys

import engine  # noqa: F401  (before mlx)
from engine.bench import long_prompt
from engine.default_model import default_model_dir
from engine.requests import SpecMethod, SpeculativeParams
from engine.speculative.catch_up_pacer import CatchUpPacer

PACED = CatchUpPacer.budget


def whole_chunks(self) -> int:
    """Before: every round's catch-up took a whole prefill chunk per row."""
    return self.max_chunk


KEYS = (
    "gap_ratio",
    "ttft_ratio",
    "gap_p99_with_long_prompt_s",
    "gap_p99_without_s",
    "chat_turn_wait_max_with_long_prompt_s",
    "long_prompt_ttft_alone_s",
    "long_prompt_ttft_beside_chats_s",
    "decode_step_median_ms",
    "catch_up_steps_runs",
)


def measure_once(long_tokens: int, *, head: bool = False) -> dict:
    return asyncio.run(
        long_prompt.measure(
            None,
            long_tokens=long_tokens,
            running=3,
            prefill_chunk=None,
            settle_tokens=5,
            gap_factor=3.0,
            repeats=1,
            speculative=SpeculativeParams(method=SpecMethod.DRAFT_MODEL, draft_tokens=3),
            draft_model=None if head else str(default_model_dir()),
        )
    )


if __name__ == "__main__":
    turns = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    long_tokens = int(sys.argv[3]) if len(sys.argv) > 3 else 1024
    head = len(sys.argv) > 4 and sys.argv[4] == "head"
    rows = []
    for turn in range(turns):
        for name, budget in (("whole_chunks", whole_chunks), ("paced", PACED)):
            CatchUpPacer.budget = budget
            row = measure_once(long_tokens, head=head)
            rows.append({"catch_up": name, "turn": turn, **{k: row[k] for k in KEYS}})
            print(rows[-1], flush=True)
            with open(sys.argv[1], "w") as f:
                json.dump({"command": " ".join(sys.argv), "rows": rows}, f, indent=1)
