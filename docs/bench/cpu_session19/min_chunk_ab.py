"""Session 19: the long-prompt benchmark (default config) with the pacer's least chunk at 16
tokens (the default) and at 8, alternated in one process. Late in a 2,048-token prompt a
16-token step costs 4-5 decode steps on the 2-core CPU. Run: PYTHONPATH=. python THIS OUT [turns]."""

from __future__ import annotations

import json
import sys

import engine  # noqa: F401  (before mlx)
from engine.core import prefill_pacer
from order_ab import KEYS, measure_once  # this folder's, beside it

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
            row = measure_once()
            rows.append({"min_chunk": least, "turn": turn, **{k: row[k] for k in KEYS}})
            print(rows[-1], flush=True)
            with open(sys.argv[1], "w") as f:
                json.dump({"command": " ".join(sys.argv), "rows": rows}, f, indent=1)
