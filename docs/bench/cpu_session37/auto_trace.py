"""Every choice auto makes in a benchmark run, in order: time, batch size, the rows' priced
acceptance, the k chosen for each, and the cost it priced widths 2-9 at; written as JSON
lines to the path in AUTO_TRACE (default /tmp/auto_trace.jsonl) for reading run by run.
`python auto_trace.py [bench args...]`."""

# isort: off
import engine  # noqa: F401  (OpenBLAS before MLX)

# isort: on
import json
import os
import sys
import time

from engine.bench.__main__ import main
from engine.speculative import auto

out = open(os.environ.get("AUTO_TRACE", "/tmp/auto_trace.jsonl"), "w")
choose = auto.AutoPolicy.choose


def traced(self, rates, batch, k_max, forced=(), found=None):
    ks = choose(self, rates, batch, k_max, forced, found)
    costs = [round(self.costs.relative(batch, w), 3) for w in range(2, 10)]
    line = {"t": round(time.perf_counter(), 3), "b": batch, "rates": [round(r, 3) for r in rates]}
    line.update(found=[round(f, 3) for f in found or []], ks=ks, costs=costs, idle=self.idle_rounds)
    out.write(json.dumps(line) + "\n")
    out.flush()
    return ks


auto.AutoPolicy.choose = traced
sys.exit(main(sys.argv[1:]))
