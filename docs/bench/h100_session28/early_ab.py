"""Session 28: our engine with its decoder layers launched early ("ours": engine/core/early_launch.py)
and evaluated at the end ("mlx"), switched with set_early_launch,
alternated in one process: plain decoding and synthetic speculation (k=4, p=0.9), lossless
against mlx_lm.generate. Usage: python early_ab.py MODEL OUT.json TOKENS [c ...]"""

import asyncio
import json
import os
import statistics
import sys

os.environ["TANDEM_EARLY_LAUNCH"] = "1"  # opt-in; switched off and on with set_early_launch


import engine  # noqa: E402,F401
from engine.api import Engine, EngineConfig  # noqa: E402
from engine.bench.baselines import mismatches, reference_tokens, run_ours  # noqa: E402
from engine.bench.synthetic import SyntheticDrafter  # noqa: E402
from engine.bench.workloads import messages_for, prompt_ids  # noqa: E402
from engine.kernels.as_shipped import mlx_as_shipped  # noqa: E402
from engine.models import load_model  # noqa: E402
from engine.requests import SpecMethod, SpeculativeParams  # noqa: E402
from engine.core.early_launch import set_early_launch  # noqa: E402

REPEATS, K, P = int(os.environ.get("REPEATS", 3)), 4, 0.9


async def main(spec: str, out: str, tokens: int, conc: list[int]) -> None:
    ways = ["mlx", "ours"]
    loaded = load_model(spec)
    synth = SyntheticDrafter(vocab_size=loaded.info.vocab_size)
    eng = Engine(
        EngineConfig(
            model=spec,
            max_batch=max(conc),
            prompt_cache=False,
            log_blas=False,
            extra_drafters=synth.entry(),
        )
    )
    eng.start()
    await eng.wait_ready()
    model = await eng.run_on_engine_thread(lambda: eng._worker.core_for().target.model)
    tok = loaded.tokenizer

    async def use(name: str) -> None:
        await eng.run_on_engine_thread(lambda: set_early_launch(name == "ours"))

    rows = []
    for c in conc:
        prompts = [prompt_ids(tok, m) for m in messages_for("chat", c)]
        await use("mlx")
        with mlx_as_shipped():
            refs = [reference_tokens(model, tok, p, tokens) for p in prompts]
        for p, r in zip(prompts, refs):
            synth.expect(p, r, P)
        params = SpeculativeParams(method=SpecMethod.SYNTHETIC, draft_tokens=K)
        runs = {(m, s): [] for m in ways for s in ("plain", "syn")}
        for warm in ways:
            await use(warm)
            await run_ours(eng, prompts, tokens)
            await run_ours(eng, prompts, tokens, speculative=params)
        for rep in range(REPEATS):
            order = list(ways) if rep % 2 == 0 else list(ways)[::-1]
            for name in order:
                await use(name)
                for s in ("plain", "syn"):
                    run = await run_ours(
                        eng, prompts, tokens, speculative=params if s == "syn" else None
                    )
                    bad = mismatches(model, prompts, refs, [run])
                    runs[(name, s)].append(run.tokens_per_s)
                    print(c, rep, name, s, f"{run.tokens_per_s:.1f} tok/s",
                          "lossless" if not bad else f"MISMATCH {bad}", flush=True)
        await use("mlx")
        med = {f"{m}_{s}": statistics.median(v) for (m, s), v in runs.items()}
        row = {"concurrency": c, "runs": {f"{m}_{s}": v for (m, s), v in runs.items()}, "median": med}
        for m in ways:
            row[f"{m}_over_mlx_plain"] = med[f"{m}_plain"] / med["mlx_plain"]
            row[f"{m}_over_mlx_syn"] = med[f"{m}_syn"] / med["mlx_syn"]
            row[f"speedup_{m}"] = med[f"{m}_syn"] / med[f"{m}_plain"]
            row[f"{m}_syn_over_mlx_plain"] = med[f"{m}_syn"] / med["mlx_plain"]
        rows.append(row)
        print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()
               if k not in ("runs", "median")}, flush=True)
    await eng.stop()
    json.dump({"model": spec, "tokens": tokens, "ways": ways, "rows": rows}, open(out, "w"), indent=1)


asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), [int(c) for c in sys.argv[4:]] or [1, 4]))
