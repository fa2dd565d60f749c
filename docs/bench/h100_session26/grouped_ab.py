"""Session 26: our engine with the verify-attention kernel computing a group of query heads per
block (the new default) against the kernel as it was (a block per query head, OLD_MODULE.py),
alternated in one process: plain decoding and synthetic speculation (k=4, p=0.9), lossless
against mlx_lm.generate. Usage: python grouped_ab.py MODEL OLD_MODULE.py OUT.json TOKENS [c ...]
With LONG=L in the environment the prompts are random tokens, row i about L + 97 * i long (a
ragged batch of long chats) instead of the chat workload's."""

import asyncio
import importlib.util
import json
import os
import random
import statistics
import sys

import engine  # noqa: F401
import mlx.core as mx
from engine.api import Engine, EngineConfig
from engine.bench.baselines import mismatches, reference_tokens, run_ours
from engine.bench.synthetic import SyntheticDrafter
from engine.bench.workloads import messages_for, prompt_ids
from engine.kernels import verify_attention_cuda as vac
from engine.kernels.as_shipped import mlx_as_shipped
from engine.models import load_model
from engine.requests import SpecMethod, SpeculativeParams

REPEATS, K, P = 3, 4, 0.9
NEW = {"verify_attention": vac.verify_attention, "takes": vac.takes}


def load_old(path: str):
    spec = importlib.util.spec_from_file_location("old_vac", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    # its own name: MLX keeps compiled kernels by name and template
    mod._kernel = mx.fast.cuda_kernel(
        name="tandem_verify_attention_old",
        input_names=["q", "k", "v", "mask", "scale"],
        output_names=["out"],
        source=mod._SOURCE,
    )
    return {"verify_attention": mod.verify_attention, "takes": mod.takes}


async def main(spec: str, old_path: str, out: str, tokens: int, conc: list[int]) -> None:
    ways = {"grouped": NEW, "old": load_old(old_path)}
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
        def swap():
            for attr, fn in ways[name].items():
                setattr(vac, attr, fn)

        await eng.run_on_engine_thread(swap)

    rows = []
    for c in conc:
        long = int(os.environ.get("LONG", "0"))
        if long:
            rng = random.Random(c)
            vocab = loaded.info.vocab_size
            prompts = [[rng.randrange(vocab) for _ in range(long + 97 * i)] for i in range(c)]
        else:
            prompts = [prompt_ids(tok, m) for m in messages_for("chat", c)]
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
                    print(
                        c,
                        rep,
                        name,
                        s,
                        f"{run.tokens_per_s:.1f} tok/s",
                        "lossless" if not bad else f"MISMATCH {bad}",
                        flush=True,
                    )
        await use("grouped")
        med = {f"{m}_{s}": statistics.median(v) for (m, s), v in runs.items()}
        row = {
            "concurrency": c,
            "runs": {f"{m}_{s}": v for (m, s), v in runs.items()},
            "median": med,
            "grouped_over_old_plain": med["grouped_plain"] / med["old_plain"],
            "grouped_over_old_syn": med["grouped_syn"] / med["old_syn"],
            "speedup_grouped": med["grouped_syn"] / med["grouped_plain"],
            "speedup_old": med["old_syn"] / med["old_plain"],
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
        {"model": spec, "long": os.environ.get("LONG"), "tokens": tokens, "rows": rows}, open(out, "w"), indent=1
    )


asyncio.run(
    main(
        sys.argv[1],
        sys.argv[2],
        sys.argv[3],
        int(sys.argv[4]),
        [int(c) for c in sys.argv[5:]] or [1, 4, 16],
    )
)
