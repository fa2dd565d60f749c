"""The engine bench with every layer's compaction timed (count and ms, each evaluated): how much
of a run compaction takes.

    PYTHONPATH=. python THIS --workload rewrite --speculative auto --concurrency 4 ...
"""

from __future__ import annotations

# isort: off
import engine  # noqa: F401  (OpenBLAS before the first import of MLX)

# isort: on
import atexit
import sys
import time

import mlx.core as mx

from engine.bench.__main__ import main
from engine.cache import ragged

STATS = {"count": 0, "seconds": 0.0}
ORIGINAL = ragged.RaggedBatchKVCache.compact


def timed_compact(self) -> None:
    if self.keys is None or not self.hole_spans:
        ORIGINAL(self)
        return
    start = time.perf_counter()
    ORIGINAL(self)
    mx.eval(self.keys, self.values)
    STATS["count"] += 1
    STATS["seconds"] += time.perf_counter() - start


def report() -> None:
    ms = round(STATS["seconds"] * 1e3, 1)
    print("COMPACTIONS", STATS["count"], "layer-compactions,", ms, "ms", file=sys.stderr)


if __name__ == "__main__":
    ragged.RaggedBatchKVCache.compact = timed_compact
    atexit.register(report)
    sys.argv = ["bench", *sys.argv[1:]]
    main()
