"""python -m engine.bench.profile_ladder: ms per decode step, and per verify round (k=4), from
mlx-lm's bare loops up to our full engine, on one model in one process, repeats alternated
(medians): where the engine's time goes beyond the forward itself.

Plain step rungs: bare-generate (mlx-lm generate_step, batch 1) or bare-batchgen (mlx-lm's
BatchGenerator, batch > 1); bare-forward (forward + argmax over mlx-lm's plain KVCache, the
ratio's base); batch-cache-masked (mlx-lm's BatchKVCache: a mask every step); ours-cache-equal
and ours-cache-ragged (our RaggedBatchKVCache, rows of one length: no mask; of up to seven
lengths: a mask); engine-core (EngineCore.step without asyncio); engine-api (engine.api's
Engine under asyncio). Verify rounds: bare-verify (width k+1 over a plain cache, all rows
trimmed alike), ours-verify (our cache with per-row rollback), engine-core-verify and
engine-api-verify (the synthetic drafter at acceptance 0.9), engine-core-ahead (engine-core-verify
with each round queued before the last is read back: engine/core/lookahead.py). A rung that fails records its
error; the others still run. The bare rungs and batch-cache-masked run mlx-lm on MLX's own
kernels, as it ships (on CUDA Tandem's kernels would otherwise take its masked attention too).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine.bench import ladder_rungs as rungs
from engine.bench.__main__ import machine
from engine.bench.cli_args import positive_int
from engine.bench.process_exit import run_and_exit
from engine.bench.synthetic import SyntheticDrafter
from engine.kernels.as_shipped import mlx_as_shipped

DEFAULT_BATCHES = (1, 32)
DEFAULT_CONTEXT = 256
DEFAULT_TOKENS = 64
DEFAULT_REPEATS = 3
BASE_RUNG = "bare-forward"
# verify rungs against the plain step of their level, for the "round / step" column
PLAIN_OF = {
    "bare-verify": "bare-forward",
    "ours-verify": "ours-cache-equal",
    "engine-core-verify": "engine-core",
    "engine-core-ahead": "engine-core",
    "engine-api-verify": "engine-api",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m engine.bench.profile_ladder", description=__doc__)
    p.add_argument("--model", default=None, help="model folder, HF repo id, random:1b|8b|tiny|host")
    p.add_argument("--batch", type=positive_int, nargs="+", default=list(DEFAULT_BATCHES))
    p.add_argument(
        "--context", type=positive_int, default=DEFAULT_CONTEXT, help="prompt tokens per row"
    )
    p.add_argument(
        "--tokens", type=positive_int, default=DEFAULT_TOKENS, help="timed steps per run"
    )
    p.add_argument(
        "--repeats", type=positive_int, default=DEFAULT_REPEATS, help="alternated runs each"
    )
    p.add_argument(
        "--prefill-chunk",
        type=positive_int,
        default=None,
        help="default: every row's prompt in one step, so that all rows join together",
    )
    p.add_argument("--only", nargs="+", default=None, help="run only these rungs")
    p.add_argument("--json", type=Path, default=None, help="write results here")
    args = p.parse_args(argv)
    # the ragged rung's rows are up to 6 tokens shorter than --context (ladder_rungs.prompts_for)
    shorter = min(max(args.batch) - 1, 6)
    ragged = args.only is None or "ours-cache-ragged" in args.only
    if ragged and args.context <= shorter:
        p.error(
            f"--context must be > {shorter} at --batch {max(args.batch)}: the ragged rows are "
            f"up to {shorter} tokens shorter"
        )
    return args


class Ladder:
    """One loaded model, an EngineCore and an Engine on it, and the rungs over them."""

    def __init__(self, args: argparse.Namespace) -> None:
        from engine.api import Engine, EngineConfig
        from engine.core.engine_core import EngineCore
        from engine.models import load_model

        self.args = args
        self.loaded = load_model(args.model)
        self.model = self.loaded.model
        self.synth = SyntheticDrafter(vocab_size=self.loaded.info.vocab_size)
        config = EngineConfig(
            model=args.model,
            # the rungs time a batch's steps, not its admission: every prompt is prefilled in
            # the first step (paced in beside decoding rows, the first would finish first)
            prefill_chunk=args.prefill_chunk or max(args.batch) * args.context,
            prefill_gap_factor=None,
            max_batch=max(args.batch),
            prompt_cache=False,  # the rows' prompts repeat; the bare rungs have none
            log_blas=False,
            extra_drafters=self.synth.entry(),
        )
        self.core = EngineCore(self.loaded, config=config)
        self.loop = asyncio.new_event_loop()
        self.engine = Engine(config)
        self.engine_error: str | None = None
        try:
            self.loop.run_until_complete(self._start_engine())
        except Exception as exc:  # noqa: BLE001 - its rungs record this; the rest still run
            self.engine_error = f"{type(exc).__name__}: {exc}"

    async def _start_engine(self) -> None:
        self.engine.start()
        await self.engine.wait_ready()

    def prompts(self, batch: int, *, ragged: bool = False) -> list[list[int]]:
        return rungs.prompts_for(batch, self.args.context, ragged=ragged)

    def expect(self, prompts: list[list[int]]) -> None:
        """The synthetic drafter drafts each prompt's greedy reply, as our engine produces it
        (equal to mlx_lm.generate's; a batched bare argmax drifts from it on near ties)."""
        replies = rungs.engine_replies(
            self.core, prompts, rungs.reply_tokens(self.args.tokens, verify=True) + 2
        )
        for prompt, reply in zip(prompts, replies):
            self.synth.expect(prompt, reply, rungs.DEFAULT_ACCEPTANCE)

    def rungs_for(self, batch: int) -> dict[str, Callable[[], dict]]:
        m, t = self.model, self.args.tokens
        equal, ragged = self.prompts(batch), self.prompts(batch, ragged=True)
        out: dict[str, Callable[[], dict]] = {}
        if batch == 1:
            out["bare-generate"] = shipped(lambda: rungs.bare_generate(m, equal, t))
        else:
            out["bare-batchgen"] = shipped(lambda: rungs.bare_batchgen(m, equal, t))
        out["bare-forward"] = shipped(lambda: rungs.bare_forward(m, equal, t))
        out["batch-cache-masked"] = shipped(lambda: rungs.batch_cache(m, equal, t, ours=False))
        out["ours-cache-equal"] = lambda: rungs.batch_cache(m, equal, t, ours=True)
        if batch > 1:  # one row has no other row to differ from
            out["ours-cache-ragged"] = lambda: rungs.batch_cache(m, ragged, t, ours=True)
        out["engine-core"] = lambda: rungs.engine_core(self.core, equal, t)
        out["engine-api"] = lambda: self.api(equal, verify=False)
        out["bare-verify"] = shipped(lambda: rungs.bare_verify(m, equal, t))
        out["ours-verify"] = lambda: rungs.ours_verify(m, equal, t)
        out["engine-core-verify"] = lambda: rungs.engine_core(self.core, equal, t, verify=True)
        out["engine-core-ahead"] = lambda: rungs.engine_core(
            self.core, equal, t, verify=True, ahead=True
        )
        out["engine-api-verify"] = lambda: self.api(equal, verify=True)
        if self.args.only:
            out = {k: v for k, v in out.items() if k in self.args.only}
        return out

    def api(self, prompts: list[list[int]], *, verify: bool) -> dict:
        if self.engine_error:
            raise RuntimeError(f"the engine did not start: {self.engine_error}")
        coro = rungs.engine_api(self.engine, prompts, self.args.tokens, verify=verify)
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        if self.engine_error is None:
            self.loop.run_until_complete(self.engine.stop())
        self.loop.close()


def shipped(fn: Callable[[], dict]) -> Callable[[], dict]:
    """A rung of mlx-lm's own code, run on MLX's own kernels (engine/kernels/as_shipped.py)."""

    def run() -> dict:
        with mlx_as_shipped():
            return fn()

    return run


def measure(ladder: Ladder, batch: int, repeats: int) -> list[dict]:
    """Every rung at this batch size, `repeats` times alternated; one row per rung."""
    ladder.expect(ladder.prompts(batch))
    todo = ladder.rungs_for(batch)
    runs: dict[str, list[dict]] = {name: [] for name in todo}
    errors: dict[str, str] = {}
    for _ in range(repeats):
        for name, fn in todo.items():
            if name in errors:
                continue
            try:
                runs[name].append(fn())
            except Exception as exc:  # noqa: BLE001 - recorded; the other rungs go on
                errors[name] = f"{type(exc).__name__}: {exc}"
                logging.debug("rung %s failed:\n%s", name, traceback.format_exc())
    rows = []
    for name, results in runs.items():
        row: dict[str, Any] = {"rung": name, "batch": batch}
        if name in errors:
            row["error"] = errors[name]
        if results:
            row["ms"] = round(statistics.median(r["ms"] for r in results), 3)
            row["runs_ms"] = [round(r["ms"], 3) for r in results]
            row["detail"] = {k: v for k, v in results[-1].items() if k != "ms"}
        rows.append(row)
    add_ratios(rows)
    return rows


def add_ratios(rows: list[dict]) -> None:
    """Each row against bare-forward at its batch; verify rounds against their level's step."""
    ms = {r["rung"]: r.get("ms") for r in rows}
    base = ms.get(BASE_RUNG)
    for row in rows:
        mine = row.get("ms")
        row["ratio_to_bare"] = round(mine / base, 3) if mine and base else None
        plain = ms.get(PLAIN_OF.get(row["rung"], ""))
        row["round_per_step"] = round(mine / plain, 3) if mine and plain else None


def table(rows: list[dict]) -> str:
    lines = [
        f"| rung | batch | ms/step | x {BASE_RUNG} | round/step | note |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        ms = f"{r['ms']:.2f}" if r.get("ms") else "-"
        ratio = f"{r['ratio_to_bare']:.2f}" if r.get("ratio_to_bare") else "-"
        per = f"{r['round_per_step']:.2f}" if r.get("round_per_step") else ""
        note = r.get("error", "")[:120].replace("|", "/")
        lines.append(f"| {r['rung']} | {r['batch']} | {ms} | {ratio} | {per} | {note} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING)
    args = parse_args(argv)
    print(f"machine: {machine()}", flush=True)
    ladder = Ladder(args)
    rows: list[dict] = []
    try:
        for batch in args.batch:
            batch_rows = measure(ladder, batch, args.repeats)
            print(table(batch_rows), flush=True)
            rows.extend(batch_rows)
    finally:
        ladder.close()
    report = {
        "command": "python -m engine.bench.profile_ladder " + " ".join(argv or sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": machine(),
        "model": ladder.loaded.info.name,
        "context": args.context,
        "tokens": args.tokens,
        "repeats": args.repeats,
        "draft_tokens": rungs.DEFAULT_K,
        "acceptance": rungs.DEFAULT_ACCEPTANCE,
        "results": rows,
    }
    print(f"\n{report['model']}, context {args.context}, {args.tokens} steps, medians of "
          f"{args.repeats}\n\n{table(rows)}", flush=True)  # fmt: skip
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    run_and_exit(main)
