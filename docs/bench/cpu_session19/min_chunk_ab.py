"""Session 19: the long-prompt benchmark (default config) with the pacer's least chunk at 16
tokens (the default) and at 8, alternated in one process. Late in a 2,048-token prompt a
16-token step costs 4-5 decode steps on the 2-core CPU. Run: PYTHONPATH=. python THIS OUT [turns]."""

from __future__ import annotations

import asyncio
import json
import sys

import engine  # noqa: F401  (before mlx)
from engine.bench import long_prompt
from engine.core import prefill_pacer

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

INIT = prefill_pacer.PrefillPacer.__init__


def least_chunk(least: int) -> None:
    """Every pacer made from now on takes `least` as its least chunk."""

    def init(self, *args, **kwargs):
        INIT(self, *args, **kwargs)
        self.min_chunk = least

    prefill_pacer.PrefillPacer.__init__ = init


if __name__ == "__main__":
    turns = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    rows = []
    for turn in range(turns):
        for least in (16, 8):
            least_chunk(least)
            row = asyncio.run(
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
            rows.append({"min_chunk": least, "turn": turn, **{k: row[k] for k in KEYS}})
            print(rows[-1], flush=True)
            with open(sys.argv[1], "w") as f:
                json.dump({"command": " ".join(sys.argv), "rows": rows}, f, indent=1)
