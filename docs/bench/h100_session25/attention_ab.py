"""Session 25: a ragged batch's plain-step attention three ways, alternated in one process with
mlx-lm's BatchGenerator: as measured per batch size (the default), always the CUDA kernel, always
MLX's ops (engine/core/decode_attention_choice.py). Plain decoding, lossless against
mlx_lm.generate. Usage: python attention_ab.py MODEL OUT.json TOKENS [concurrency ...]"""

import asyncio
import json
import statistics
import sys

import engine  # noqa: F401
from engine.api import Engine, EngineConfig
from engine.bench.baselines import mismatches, reference_tokens, run_batch_generator, run_ours
from engine.bench.workloads import messages_for, prompt_ids
from engine.kernels.as_shipped import mlx_as_shipped
from engine.models import load_model

REPEATS = 3
MODES = {"measured": None, "kernel": True, "mlx": False}


async def main(spec: str, out: str, tokens: int, conc: list[int]) -> None:
    loaded = load_model(spec)
    eng = Engine(EngineConfig(model=spec, max_batch=max(conc), prompt_cache=False, log_blas=False))
    eng.start()
    await eng.wait_ready()
    model = await eng.run_on_engine_thread(lambda: eng._worker.core_for().target.model)
    tok = loaded.tokenizer

    def executor():
        return eng._worker.core_for().executor

    async def mode(value) -> None:
        await eng.run_on_engine_thread(lambda: setattr(executor().attention, "mode", value))

    rows = []
    for c in conc:
        prompts = [prompt_ids(tok, m) for m in messages_for("chat", c)]
        with mlx_as_shipped():
            refs = [reference_tokens(model, tok, p, tokens) for p in prompts]
            run_batch_generator(model, tok, prompts, tokens)
        runs = {m: [] for m in (*MODES, "batch_generator")}
        for value in MODES.values():  # warm every way at this size
            await mode(value)
            await run_ours(eng, prompts, tokens)
        for rep in range(REPEATS):
            order = list(MODES) if rep % 2 == 0 else list(MODES)[::-1]
            with mlx_as_shipped():
                runs["batch_generator"].append(
                    run_batch_generator(model, tok, prompts, tokens).tokens_per_s
                )
            for name in order:
                await mode(MODES[name])
                run = await run_ours(eng, prompts, tokens)
                bad = mismatches(model, prompts, refs, [run])
                runs[name].append(run.tokens_per_s)
                print(
                    c,
                    rep,
                    name,
                    f"{run.tokens_per_s:.1f} tok/s",
                    "lossless" if not bad else f"MISMATCH {bad}",
                    flush=True,
                )
        await mode(None)
        choice = await eng.run_on_engine_thread(lambda: executor().attention.summary())
        med = {k: statistics.median(v) for k, v in runs.items()}
        row = {
            "concurrency": c,
            "runs": runs,
            "median": med,
            "vs_batch_generator": {m: med[m] / med["batch_generator"] for m in MODES},
            "measured_over_kernel": med["measured"] / med["kernel"],
            "measured_over_mlx": med["measured"] / med["mlx"],
            "choice": choice,
        }
        rows.append(row)
        print({k: v for k, v in row.items() if k != "runs"}, flush=True)
    await eng.stop()
    json.dump({"model": spec, "tokens": tokens, "rows": rows}, open(out, "w"), indent=1)


asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), [int(c) for c in sys.argv[4:]]))
