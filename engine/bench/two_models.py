"""python -m engine.bench.two_models: two models generating at once on the one MLX thread.

Each model alone, both together, and the sum of the two run one after the other, which is the
ideal for one thread: `together / sequential` is what interleaving keeps of it (1.0: no cost).
Each round runs the three back to back in a rotated order and gives one ratio, since these
machines are shared and their speed drifts over minutes; the median round is reported. Every
row is checked against `mlx_lm.generate` alone. Then how long a load holds the MLX thread (its
opening and each slice) and the longest wait between one model's tokens while the other loads,
against the same run without a load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine.api import Engine, EngineConfig
from engine.bench.baselines import RunResult, reference_tokens, run_ours
from engine.bench.cli_args import int_range, positive_int
from engine.bench.workloads import messages_for, prompt_ids
from engine.hosting.model_loader import LoadJob
from engine.kernels.as_shipped import mlx_as_shipped
from engine.requests import MAX_MAX_TOKENS, GenerationRequest, TokenEvent

DEFAULT_CONCURRENCY = 4  # rows per model
DEFAULT_MAX_TOKENS = 48
DEFAULT_REPEATS = 7
DEFAULT_CUT = (8, 4)  # the second model by default: the default model's first 8 and last 4 layers


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m engine.bench.two_models", description=__doc__)
    p.add_argument("--model", default=None, help="the first model (default: the built-in one)")
    p.add_argument(
        "--second",
        default=None,
        help="the second model folder (default: the built-in model's first 8 and last 4 layers, "
        "cut by engine.bench.layer_draft into a temporary folder)",
    )
    p.add_argument(
        "--concurrency", type=positive_int, default=DEFAULT_CONCURRENCY, help="rows per model"
    )
    # the load-gap runs ask for 4 x --max-tokens, which a request caps at MAX_MAX_TOKENS
    p.add_argument(
        "--max-tokens", type=int_range(1, MAX_MAX_TOKENS // 4), default=DEFAULT_MAX_TOKENS
    )
    p.add_argument("--repeats", type=positive_int, default=DEFAULT_REPEATS)
    p.add_argument("--workload", choices=("chat", "rewrite"), default="chat")
    p.add_argument("--json", type=Path, default=None, help="write results here")
    return p.parse_args(argv)


async def run_pair(eng: Engine, first, second, max_tokens: int, spec_b: str) -> tuple:
    """Both models' rows submitted together; each RunResult timed from the common start."""
    start = time.perf_counter()
    a, b = await asyncio.gather(
        run_ours(eng, first, max_tokens), run_ours(eng, second, max_tokens, model=spec_b)
    )
    return a, b, time.perf_counter() - start


async def token_times(eng: Engine, request: GenerationRequest) -> list[float]:
    return [
        time.perf_counter()
        async for event in eng.submit(request)
        if isinstance(event, TokenEvent) and event.token_ids
    ]


class LoadTimer:
    """How long each piece of a load held the MLX thread (LoadJob.open and each slice)."""

    def __init__(self) -> None:
        self.open_s: list[float] = []
        self.slices_s: list[float] = []

    def __enter__(self) -> LoadTimer:
        self._open, self._advance = LoadJob.open, LoadJob.advance
        LoadJob.open = self._timed(self._open, self.open_s)
        LoadJob.advance = self._timed(self._advance, self.slices_s)
        return self

    def __exit__(self, *exc) -> None:
        LoadJob.open, LoadJob.advance = self._open, self._advance

    @staticmethod
    def _timed(method, into: list[float]):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                into.append(time.perf_counter() - start)

        return timed


async def load_gap(
    eng: Engine, prompts, max_tokens: int, streams: str, loads: str, *, load: bool
) -> dict:
    """Rows on `streams` decode while (with `load`) the model `loads` is loaded: the longest
    and the median wait between one row's tokens, and how long each piece of the load held
    the MLX thread."""
    await eng.unload_model(loads)
    rows = [
        asyncio.ensure_future(
            token_times(
                eng, GenerationRequest(prompt_tokens=p, max_tokens=max_tokens, model=streams)
            )
        )
        for p in prompts
    ]
    await asyncio.sleep(1.0)  # prompts processed: the rows decode
    load_s, timer = None, LoadTimer()
    if load:
        t0 = time.perf_counter()
        with timer:
            await eng.load_model(loads)
        load_s = time.perf_counter() - t0
    times = await asyncio.gather(*rows)
    gaps = [b - a for row in times for a, b in zip(row, row[1:])]
    if not load:
        await eng.load_model(loads)
    ms = lambda seconds: round(1000 * seconds, 1)  # noqa: E731
    return {
        "load_s": round(load_s, 3) if load_s else None,
        "max_gap_ms": ms(max(gaps)),
        "median_gap_ms": ms(statistics.median(gaps)),
        "open_ms": ms(max(timer.open_s)) if timer.open_s else None,
        "slices": len(timer.slices_s),
        "median_slice_ms": ms(statistics.median(timer.slices_s)) if timer.slices_s else None,
        "max_slice_ms": ms(max(timer.slices_s)) if timer.slices_s else None,
    }


async def bench(args: argparse.Namespace, second_path: str) -> dict:
    from engine.models import load_model

    loaded_a, loaded_b = load_model(args.model), load_model(second_path)
    c, n = args.concurrency, args.max_tokens
    prompts_a = [prompt_ids(loaded_a.tokenizer, m) for m in messages_for(args.workload, c)]
    prompts_b = [prompt_ids(loaded_b.tokenizer, m) for m in messages_for(args.workload, 2 * c)][c:]
    with mlx_as_shipped():  # the references as mlx-lm gives them, on MLX's own kernels
        ref_a = [reference_tokens(loaded_a.model, loaded_a.tokenizer, p, n) for p in prompts_a]
        ref_b = [reference_tokens(loaded_b.model, loaded_b.tokenizer, p, n) for p in prompts_b]
    eng = Engine(
        EngineConfig(model=args.model, prompt_cache=False, log_blas=False, max_batch=2 * c)
    )
    eng.start()
    info_a = await eng.wait_ready()
    info_b = await eng.load_model(second_path, pin=True)
    await run_pair(eng, prompts_a[:2], prompts_b[:2], 8, second_path)  # warm-up
    alone_a: list[RunResult] = []
    alone_b: list[RunResult] = []
    together: list[tuple] = []
    order = ["a", "b", "both"]
    for repeat in range(args.repeats):
        for what in order[repeat % 3 :] + order[: repeat % 3]:  # rotated each repeat
            if what == "a":
                alone_a.append(await run_ours(eng, prompts_a, n))
            elif what == "b":
                alone_b.append(await run_ours(eng, prompts_b, n, model=second_path))
            else:
                together.append(await run_pair(eng, prompts_a, prompts_b, n, second_path))
    first_path = str(Path(info_a.path))  # the first model by its folder (None: the default)
    gaps = {}
    for name, streams, loads, prompts in (
        ("second_loads", first_path, second_path, prompts_a),
        ("first_loads", second_path, first_path, prompts_b),
    ):
        gaps[name] = {
            "without_load": await load_gap(eng, prompts, 4 * n, streams, loads, load=False),
            "while_loading": await load_gap(eng, prompts, 4 * n, streams, loads, load=True),
        }
    await eng.stop()

    t_a = statistics.median(r.wall_s for r in alone_a)
    t_b = statistics.median(r.wall_s for r in alone_b)
    t_both = statistics.median(t for _, _, t in together)
    gen_a, gen_b = alone_a[0].generated, alone_b[0].generated
    rounds = [
        round((a.wall_s + b.wall_s) / both[2], 3) for a, b, both in zip(alone_a, alone_b, together)
    ]
    lossless = all(r.tokens == ref_a for r in alone_a) and all(r.tokens == ref_b for r in alone_b)
    lossless = lossless and all(a.tokens == ref_a and b.tokens == ref_b for a, b, _ in together)
    result = {
        "command": "python -m engine.bench.two_models " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "models": [info_a.name, info_b.name],
        "rows_per_model": c,
        "max_tokens": n,
        "alone_tokens_per_s": [round(gen_a / t_a, 2), round(gen_b / t_b, 2)],
        "together_tokens_per_s": round((gen_a + gen_b) / t_both, 2),
        "sequential_tokens_per_s": round((gen_a + gen_b) / (t_a + t_b), 2),
        "together_vs_sequential": statistics.median(rounds),
        "together_vs_sequential_by_round": rounds,
        "runs_s": {
            "a": [round(r.wall_s, 2) for r in alone_a],
            "b": [round(r.wall_s, 2) for r in alone_b],
            "together": [round(t, 2) for _, _, t in together],
        },
        "gaps": gaps,
        "lossless": lossless,
        "load_average": [round(x, 2) for x in os.getloadavg()],  # other work on the machine
    }
    return result


def main(argv: list[str] | None = None) -> int:
    from engine.bench.__main__ import machine
    from engine.bench.layer_draft import make_layer_draft
    from engine.default_model import ensure_default_model

    logging.basicConfig(level=logging.WARNING)
    args = parse_args(argv)
    print(f"machine: {machine()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="tandem-two-models-") as tmp:
        second = args.second
        if second is None:
            first, last = DEFAULT_CUT
            cut = make_layer_draft(
                ensure_default_model(), Path(tmp) / "cut", first=first, last=last
            )
            second = str(cut)
        report = asyncio.run(bench(args, second))
    report["machine"] = machine()
    print(json.dumps({k: v for k, v in report.items() if k != "machine"}, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))
        print(f"wrote {args.json}")
    return 0 if report["lossless"] else 1


if __name__ == "__main__":
    from engine.bench.process_exit import run_and_exit

    run_and_exit(main)
