"""Session 26, fourth call: the two layouts of the attention kernel per call with cold caches,
as in a forward where every layer reads its own keys: 32 calls a group, each on its own keys
and values (grouped_check.py read the same ones 16 times, mostly from L2). Per-head against
grouped (four heads a block), alternated. Usage: python cold_check.py OUT.json"""

import json
import statistics
import sys
import time

import mlx.core as mx

from engine.bench.attention_check import verify_mask
from engine.kernels import verify_attention_cuda as vac

LAYERS, REPEATS = 32, 7
CASES = [(b, n, L) for b in (4, 16) for n in (1, 5) for L in (1024, 2048, 4096)]


def timed(fn) -> float:
    times = []
    for _ in range(REPEATS):
        mx.synchronize()
        start = time.perf_counter()
        mx.eval(fn())
        times.append((time.perf_counter() - start) / LAYERS)
    return 1e3 * statistics.median(times)


def main(out: str) -> None:
    rows = []
    hq, hk, d = 32, 8, 128
    for b, n, L in CASES:
        q = mx.random.normal((b, hq, n, d)).astype(mx.bfloat16)
        kv = [
            (
                mx.random.normal((b, hk, L, d)).astype(mx.bfloat16),
                mx.random.normal((b, hk, L, d)).astype(mx.bfloat16),
            )
            for _ in range(LAYERS)
        ]
        mask = verify_mask(b, n, L)
        mx.eval(q, kv, mask)
        scale = d**-0.5

        def calls(grouped: bool):
            vac.set_grouping(grouped)
            outs = [vac.verify_attention(q, k, v, scale=scale, mask=mask) for k, v in kv]
            vac.set_grouping(False)
            return outs

        def hot(grouped: bool):
            vac.set_grouping(grouped)
            k, v = kv[0]
            outs = [vac.verify_attention(q, k, v, scale=scale, mask=mask) for _ in kv]
            vac.set_grouping(False)
            return outs

        mx.eval(calls(True), calls(False))
        row = {"batch": b, "queries": n, "keys": L, "cold": {}, "hot": {}}
        for name, grouped in (("per_head", False), ("grouped", True), ("per_head_2", False)):
            row["cold"][name] = timed(lambda: calls(grouped))
            row["hot"][name] = timed(lambda: hot(grouped))
        rows.append(row)
        print(json.dumps(row), flush=True)
        del kv
    json.dump(rows, open(out, "w"), indent=1)


main(sys.argv[1])
