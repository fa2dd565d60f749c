"""Session 26: why long ragged prompts decoded plainly ran slower with the grouped kernel
(final.sh). Three ways alternated in one process, plain decoding of random prompts of about
LONG + 97 * i tokens: the old per-head kernel with its routing, the grouped kernel with its
routing (the code), and the grouped kernel with the old routing. Per run: tok/s, the longest
time to first token, the rest of the wall time, the plain step's mean, and which attention
calls the kernel took (by query count). Usage: python long_diag.py OLD_MODULE.py OUT.json LONG
TOKENS [c ...]"""

import asyncio
import collections
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
from engine.bench.spec_configs import take_timing
from engine.kernels import verify_attention_cuda as vac
from engine.kernels.as_shipped import mlx_as_shipped
from engine.models import load_model

REPEATS = 3
CALLS = collections.Counter()


def load_old(path: str):
    spec = importlib.util.spec_from_file_location("old_vac", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod._kernel = mx.fast.cuda_kernel(
        name="tandem_verify_attention_old",
        input_names=["q", "k", "v", "mask", "scale"],
        output_names=["out"],
        source=mod._SOURCE,
    )
    return mod


def counted(fn, way):
    def call(q, k, v, *, scale, mask):
        CALLS[(way, q.shape[0], q.shape[2])] += 1
        return fn(q, k, v, scale=scale, mask=mask)

    return call


async def main(old_path: str, out: str, long: int, tokens: int, conc: list[int]) -> None:
    old = load_old(old_path)
    ways = {
        "old": {"verify_attention": counted(old.verify_attention, "old"), "takes": old.takes},
        "grouped": {"verify_attention": counted(vac.verify_attention, "grouped"), "takes": vac.takes},
        "grouped_old_routing": {
            "verify_attention": counted(vac.verify_attention, "grouped_old_routing"),
            "takes": old.takes,
        },
    }
    spec = os.environ.get("MODEL", "random:8b")
    loaded = load_model(spec)
    eng = Engine(EngineConfig(model=spec, max_batch=max(conc), prompt_cache=False, log_blas=False))
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
        rng = random.Random(c)
        prompts = [
            [rng.randrange(loaded.info.vocab_size) for _ in range(long + 97 * i)] for i in range(c)
        ]
        with mlx_as_shipped():
            refs = [reference_tokens(model, tok, p, tokens) for p in prompts]
        for name in ways:
            await use(name)
            await run_ours(eng, prompts, tokens)
        CALLS.clear()
        runs = {name: [] for name in ways}
        for rep in range(REPEATS):
            order = list(ways) if rep % 2 == 0 else list(ways)[::-1]
            for name in order:
                await use(name)
                await take_timing(eng)
                run = await run_ours(eng, prompts, tokens)
                run.timing = await take_timing(eng)
                bad = mismatches(model, prompts, refs, [run])
                t = run.timing
                rec = {
                    "tok_s": run.tokens_per_s,
                    "ttft_max_s": max(run.ttft_s),
                    "after_first_s": run.wall_s - max(run.ttft_s),
                    "plain_step_ms": t.per_round_ms()["plain_step"],
                    "plain_steps": t.plain_steps,
                    "shared_steps": t.shared_steps,
                    "shared_tokens": t.shared_tokens,
                    "lossless": not bad,
                }
                runs[name].append(rec)
                print(c, rep, name, {k: round(v, 3) if isinstance(v, float) else v for k, v in rec.items()}, flush=True)
        calls = {f"{w}|B{b}|N{n}": k for (w, b, n), k in sorted(CALLS.items())}
        med = {
            name: {key: statistics.median(r[key] for r in rs) for key in ("tok_s", "ttft_max_s", "after_first_s", "plain_step_ms")}
            for name, rs in runs.items()
        }
        row = {"concurrency": c, "runs": runs, "median": med, "kernel_calls": calls}
        rows.append(row)
        print(json.dumps({"concurrency": c, "median": med}), flush=True)
        print(json.dumps(calls), flush=True)
    await use("grouped")
    await eng.stop()
    json.dump({"long": long, "tokens": tokens, "rows": rows}, open(out, "w"), indent=1)


asyncio.run(
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), [int(c) for c in sys.argv[5:]])
)
