"""Primitives in MLX's graph of one verify round queued ahead, and of one plain step, in the
engine (a 32-layer llama of tiny width on the CPU, 16 rows, synthetic drafter k=4 p=0.9): the
op count that `mx.export_to_dot` sees at `mx.async_eval`, by kind.

    python round_ops.py [rows]
"""

from __future__ import annotations

# isort: off
import engine  # noqa: F401  (OpenBLAS before MLX)

# isort: on
import collections
import os
import re
import sys
import tempfile

import mlx.core as mx

from engine.bench import ladder_rungs as rungs
from engine.bench import profile_ladder as pl
from engine.bench import random_model
from engine.bench.process_exit import run_and_exit
from engine.core import batch as batch_module
from engine.core import lookahead

random_model.PRESETS["host32"] = dict(
    hidden_size=128,
    num_hidden_layers=32,
    intermediate_size=256,
    num_attention_heads=32,
    num_key_value_heads=8,
)
COUNTED = (6, 7)  # which async_eval calls of a run are counted (past the first rounds)


class CountingMx:
    """mlx.core whose async_eval counts the graph it is given on the calls in COUNTED."""

    def __init__(self, label: str) -> None:
        self.label, self.calls = label, 0

    def __getattr__(self, name):
        return getattr(mx, name)

    def async_eval(self, *arrays) -> None:
        self.calls += 1
        if self.calls in COUNTED:
            with tempfile.TemporaryDirectory() as folder:
                path = os.path.join(folder, "graph.dot")
                mx.export_to_dot(path, *arrays)
                with open(path) as f:
                    kinds = re.findall(r'label\s*=\s*"([^"]*)"', f.read())
            counts = collections.Counter(re.sub(r"\s.*", "", k) for k in kinds)
            print(self.label, "call", self.calls, "ops", sum(counts.values()))
            print("  ", counts.most_common(16))
        mx.async_eval(*arrays)


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    ladder = pl.Ladder(pl.parse_args(["--model", "random:host32", "--batch", str(rows)]))
    prompts = ladder.prompts(rows)
    ladder.expect(prompts)
    lookahead.mx = CountingMx("round ahead")
    rungs.engine_core(ladder.core, prompts, 12, verify=True, ahead=True)
    lookahead.mx = mx
    batch_module.mx = CountingMx("plain step")
    rungs.engine_core(ladder.core, prompts, 12)
    batch_module.mx = mx


if __name__ == "__main__":
    run_and_exit(main)  # the ladder's Engine thread must not outlive the interpreter
