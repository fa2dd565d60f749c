"""python -m engine.bench.part_timing [--parts-json PATH] [benchmark arguments]: a benchmark run
(`python -m engine.bench`) with every part of the engine step timed: EngineCore.step, the
scheduler, the executor's plain steps and verify rounds, drafting, and the batch's launches,
read-backs and rollbacks. It prints, per part and batch size, the median and 90th percentile,
and how much of the part was spent inside `mx.eval` / `mx.async_eval` (on MLX's CUDA backend
`async_eval` returns only once the host has queued the kernels, and for a wide forward only
once most of them ran). Parts nest: a verify round's time includes its launch and rollback."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx

from engine.bench.process_exit import run_and_exit
from engine.core.batch import DecodeBatch
from engine.core.engine_core import EngineCore
from engine.core.executor import ModelExecutor
from engine.core.scheduler import Scheduler

DEFAULT_MIN_SAMPLES = 3  # parts seen fewer times (warm-up shapes) are left out of the table
PARTS: tuple[tuple[type, str], ...] = (
    (EngineCore, "step"),
    (Scheduler, "schedule"),
    (Scheduler, "update"),
    (ModelExecutor, "execute"),
    (ModelExecutor, "_plain_step"),
    (ModelExecutor, "_verify_round"),
    (ModelExecutor, "_propose"),
    (DecodeBatch, "flush"),
    (DecodeBatch, "step_launch"),
    (DecodeBatch, "step_collect"),
    (DecodeBatch, "verify_launch"),
    (DecodeBatch, "verify_collect"),
    (DecodeBatch, "rollback"),
    (DecodeBatch, "_forward"),
)
EVALS = ("eval", "async_eval")


@dataclass
class PartTime:
    """One part at one batch size: how often it ran and how long it took (milliseconds)."""

    part: str
    batch: int
    calls: int
    median_ms: float
    p90_ms: float
    eval_median_ms: float  # of that, inside mx.eval / mx.async_eval


class PartTimer:
    """Wraps the engine's parts and MLX's evaluations with wall-clock timers while installed."""

    def __init__(self, parts: tuple[tuple[type, str], ...] = PARTS) -> None:
        self.parts = parts
        self.samples: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
        self._local = threading.local()  # per thread, per running part: [time in evaluations]
        self._saved: list[tuple[Any, str, Any]] = []

    def install(self) -> None:
        for cls, name in self.parts:
            self._patch(cls, name, self._timed(getattr(cls, name), f"{cls.__name__}.{name}"))
        for name in EVALS:
            self._patch(mx, name, self._eval_timed(getattr(mx, name)))

    def uninstall(self) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()

    def _patch(self, owner: Any, name: str, replacement: Any) -> None:
        self._saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, replacement)

    @property
    def _open(self) -> list[list[float]]:
        if not hasattr(self._local, "open"):
            self._local.open = []
        return self._local.open

    def _timed(self, original: Callable[..., Any], label: str) -> Callable[..., Any]:
        def timed(obj: Any, *args: Any, **kwargs: Any) -> Any:
            batch = _batch_size(obj)
            self._open.append([0.0])
            start = time.perf_counter()
            try:
                return original(obj, *args, **kwargs)
            finally:
                spent = time.perf_counter() - start
                (in_eval,) = self._open.pop()
                self.samples[(label, batch)].append((spent, in_eval))

        return timed

    def _eval_timed(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent = time.perf_counter() - start
                for frame in self._open:  # every enclosing part spent it
                    frame[0] += spent

        return timed

    def table(self, *, min_samples: int = DEFAULT_MIN_SAMPLES) -> list[PartTime]:
        rows = []
        for (part, batch), samples in sorted(self.samples.items()):
            if len(samples) < min_samples:
                continue
            spent = sorted(s for s, _ in samples)
            rows.append(
                PartTime(
                    part=part,
                    batch=batch,
                    calls=len(samples),
                    median_ms=1e3 * statistics.median(spent),
                    p90_ms=1e3 * spent[int(0.9 * (len(spent) - 1))],
                    eval_median_ms=1e3 * statistics.median(e for _, e in samples),
                )
            )
        return rows


def _batch_size(obj: Any) -> int:
    """Rows in the running batch of the object a part belongs to (0 where it has none)."""
    batch = obj if isinstance(obj, DecodeBatch) else getattr(obj, "batch", None)
    if batch is None and isinstance(obj, EngineCore):
        batch = obj.executor.batch
    return len(batch.rows) if isinstance(batch, DecodeBatch) else 0


def format_table(rows: list[PartTime]) -> str:
    lines = [f"{'part':34s} {'rows':>4s} {'calls':>6s} {'median':>8s} {'p90':>8s} {'in eval':>8s}"]
    for r in rows:
        lines.append(
            f"{r.part:34s} {r.batch:4d} {r.calls:6d} {r.median_ms:8.3f} {r.p90_ms:8.3f} "
            f"{r.eval_median_ms:8.3f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from engine.bench.__main__ import main as bench_main

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], add_help=False)
    parser.add_argument("--parts-json", type=Path, default=None)
    args, bench_args = parser.parse_known_args(argv)
    timer = PartTimer()
    timer.install()
    try:
        code = bench_main(bench_args)
    finally:
        timer.uninstall()
    rows = timer.table()
    print("time per part (ms; rows: the running batch's size)")
    print(format_table(rows), flush=True)
    if args.parts_json:
        args.parts_json.parent.mkdir(parents=True, exist_ok=True)
        args.parts_json.write_text(json.dumps([asdict(r) for r in rows], indent=2))
    return code


if __name__ == "__main__":
    run_and_exit(lambda: main(sys.argv[1:]))
