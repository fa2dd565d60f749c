"""Session 31: concurrent tabs of the default model as the app sends them (chat prompts; each
tab its own method), alternated configurations in one engine; per configuration the median
throughput, per row its decode rate, its plain estimate (p), acceptance and verify rounds.
usage: TEMPERATURE=0 MAXT=200 PYTHONPATH=TREE python ab_tabs.py REPS cfg1 cfg2 ...
(cfg: comma-separated methods, one per tab; the prompts cycle). TEMP would be MLX's temp dir."""
import asyncio, os, statistics, sys, time

from engine.api import Engine, EngineConfig
from engine.requests import GenerationRequest, SamplingParams, SpeculativeParams

PROMPTS = [
    "Write a short story about a lighthouse keeper.",
    "Give me five tips for writing clear emails.",
    "How do I reverse a string in Python? Show the code in a code block, then explain it.",
]
TEMP = float(os.environ.get("TEMPERATURE", "0.7"))
MAXT = int(os.environ.get("MAXT", "256"))

async def run(eng, methods, seed):
    async def one(i, method):
        req = GenerationRequest(messages=[{"role": "user", "content": PROMPTS[i % 3]}], max_tokens=MAXT,
            sampling=SamplingParams(temperature=TEMP, seed=seed + i),
            speculative=SpeculativeParams(method=method))
        last = None
        async for ev in eng.submit(req):
            if type(ev).__name__ == "ErrorEvent": print("ERR", ev.message)
            if getattr(ev, "stats", None) is not None:
                last = ev.stats
        return last
    t0 = time.perf_counter()
    res = await asyncio.gather(*(one(i, m) for i, m in enumerate(methods)))
    wall = time.perf_counter() - t0
    toks = sum(s.generated_tokens for s in res)
    return wall, toks, res

async def main(reps, cfgs):
    eng = Engine(EngineConfig(model=None))
    eng.start()
    await eng.wait_ready()
    await run(eng, ["off"], 99)  # warm
    out = {c: [] for c in cfgs}
    for rep in range(reps):
        for c in cfgs:
            wall, toks, res = await run(eng, c.split(","), 1000 * rep)
            out[c].append(toks / wall)
            desc = " ".join(f"{s.generated_tokens}@{s.decode_tokens_per_s:.1f}(p{s.plain_tokens_per_s or 0:.1f})/acc{s.spec.acceptance_rate:.2f}/r{s.spec.rounds}" for s in res)
            print(f"rep{rep} {c:20s} {toks/wall:6.1f} tok/s  {desc}", flush=True)
    for c in cfgs:
        print(f"{c:20s} median {statistics.median(out[c]):6.1f} tok/s  ratio {statistics.median(out[c])/statistics.median(out[cfgs[0]]):.3f}")
    await eng.stop()

asyncio.run(main(int(sys.argv[1]), sys.argv[2:]))
