"""Session 24: our engine with sibling projections fused (the default) against the same engine
with them apart (engine.fused_projections.separate_projections), alternated in one process:
plain decoding and synthetic speculation (k=4), lossless against mlx_lm.generate.
Usage: python fused_ab.py MODEL|default OUT.json [concurrency ...]"""

import asyncio
import json
import statistics
import sys

import engine  # noqa: F401
from engine.api import Engine, EngineConfig
from engine.bench.baselines import mismatches, reference_tokens, run_ours
from engine.bench.synthetic import SyntheticDrafter
from engine.bench.workloads import messages_for, prompt_ids
from engine.fused_projections import _SHIPPED, fused_groups
from engine.kernels.as_shipped import mlx_as_shipped
from engine.models import load_model
from engine.requests import SpecMethod, SpeculativeParams

TOKENS, REPEATS, K, P = 64, 3, 4, 0.9


async def main(spec: str, out: str, conc: list[int]) -> None:
    spec = None if spec == "default" else spec
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
    groups = await eng.run_on_engine_thread(lambda: fused_groups(model))
    print(
        f"{sum(g.sharing for g in groups)} of {len(groups)} projection groups share one matmul",
        flush=True,
    )
    tok = loaded.tokenizer

    async def apart(on: bool) -> None:
        await eng.run_on_engine_thread(lambda: setattr(_SHIPPED, "on", on))

    rows = []
    for c in conc:
        prompts = [prompt_ids(tok, m) for m in messages_for("chat", c)]
        with mlx_as_shipped():
            refs = [reference_tokens(model, tok, p, TOKENS) for p in prompts]
        for p, r in zip(prompts, refs):
            synth.expect(p, r, P)
        params = SpeculativeParams(method=SpecMethod.SYNTHETIC, draft_tokens=K)
        runs = {(m, s): [] for m in ("fused", "apart") for s in ("plain", "syn")}
        for warm in ("fused", "apart"):
            await apart(warm == "apart")
            await run_ours(eng, prompts, TOKENS)
            await run_ours(eng, prompts, TOKENS, speculative=params)
        for rep in range(REPEATS):
            order = ("fused", "apart") if rep % 2 == 0 else ("apart", "fused")
            for mode in order:
                await apart(mode == "apart")
                for s in ("plain", "syn"):
                    run = await run_ours(
                        eng, prompts, TOKENS, speculative=params if s == "syn" else None
                    )
                    bad = mismatches(model, prompts, refs, [run])
                    runs[(mode, s)].append(run.tokens_per_s)
                    print(
                        c,
                        rep,
                        mode,
                        s,
                        f"{run.tokens_per_s:.1f} tok/s",
                        "lossless" if not bad else f"MISMATCH {bad}",
                        flush=True,
                    )
        await apart(False)
        med = {f"{m}_{s}": statistics.median(v) for (m, s), v in runs.items()}
        row = {
            "concurrency": c,
            "runs": {f"{m}_{s}": v for (m, s), v in runs.items()},
            "median": med,
            "fused_over_apart_plain": med["fused_plain"] / med["apart_plain"],
            "fused_over_apart_syn": med["fused_syn"] / med["apart_syn"],
            "speedup_fused": med["fused_syn"] / med["fused_plain"],
            "speedup_apart": med["apart_syn"] / med["apart_plain"],
        }
        rows.append(row)
        print(
            {
                k: (round(v, 3) if isinstance(v, float) else v)
                for k, v in row.items()
                if k != "runs"
            },
            flush=True,
        )
    await eng.stop()
    json.dump(
        {"model": spec, "tokens": TOKENS, "k": K, "p": P, "rows": rows}, open(out, "w"), indent=1
    )


asyncio.run(main(sys.argv[1], sys.argv[2], [int(c) for c in sys.argv[3:]] or [1, 4, 16]))
