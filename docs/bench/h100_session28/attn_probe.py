"""Session 28: what a one-row verify forward's attention costs against a decode step's.

The 8B's attention shape (32 query heads on 8 key heads, head size 128, bfloat16), one row of N
queries at L keys, 32 distinct caches (a model's layers) evaluated together; ms for all 32
(median), for N = 1, 2, 3, 4, 5, 8:
  rows     N rows of one query, no mask (MLX's fused vector kernel: a plain step of N rows)
  causal   one row of N queries, mask "causal" (what a batch of equal rows asks MLX for)
  mlx      the same with a boolean causal mask (MLX's path for it)
  ours     the same boolean mask through Tandem's kernel (a ragged verify forward's path)
Usage: python attn_probe.py OUT.json"""

import json
import statistics
import sys
import time

import mlx.core as mx

import engine  # noqa: F401
from engine.kernels import verify_attention_cuda as vac

LAYERS, REPS, ROUNDS = 32, 8, 3
HQ, HK, D = 32, 8, 128
QUERIES = (1, 2, 3, 4, 5, 8)


def main(out: str) -> None:
    vac.install(force=True)
    sdpa = mx.fast.scaled_dot_product_attention
    original = getattr(sdpa, "__wrapped__", sdpa)
    result = {}
    s = D**-0.5
    for L in (512, 2048):
        kb = [mx.random.normal((8, HK, L, D)).astype(mx.bfloat16) for _ in range(LAYERS)]
        vb = [mx.random.normal((8, HK, L, D)).astype(mx.bfloat16) for _ in range(LAYERS)]
        k1 = [mx.contiguous(k[:1]) for k in kb]
        v1 = [mx.contiguous(v[:1]) for v in vb]
        mx.eval(kb, vb, k1, v1)
        ways = {}
        errors = {}
        for n in QUERIES:
            kn = [mx.contiguous(k[:n]) for k in kb]
            vn = [mx.contiguous(v[:n]) for v in vb]
            qn = mx.random.normal((1, HQ, n, D)).astype(mx.bfloat16)
            qr = mx.random.normal((n, HQ, 1, D)).astype(mx.bfloat16)
            mask = (mx.arange(L)[None, :] <= (L - n + mx.arange(n))[:, None])[None, None]
            mx.eval(kn, vn, qn, qr, mask)
            ways[f"rows{n}"] = lambda i, qr=qr, kn=kn, vn=vn: original(qr, kn[i], vn[i], scale=s)
            if n > 1:
                ways[f"causal{n}"] = lambda i, qn=qn: original(qn, k1[i], v1[i], scale=s, mask="causal")
            ways[f"mlx{n}"] = lambda i, qn=qn, m=mask: original(qn, k1[i], v1[i], scale=s, mask=m)
            ways[f"ours{n}"] = lambda i, qn=qn, m=mask: vac.verify_attention(qn, k1[i], v1[i], scale=s, mask=m)
            ref = ways[f"mlx{n}"](0).astype(mx.float32)
            errors[n] = {
                "ours": mx.abs(ways[f"ours{n}"](0).astype(mx.float32) - ref).max().item(),
                "causal": mx.abs(ways[f"causal{n}"](0).astype(mx.float32) - ref).max().item() if n > 1 else 0.0,
            }
        times = {w: [] for w in ways}
        for r in range(ROUNDS):
            for name, fn in ways.items():
                for i in range(REPS + (1 if r == 0 else 0)):
                    mx.synchronize()
                    t = time.perf_counter()
                    mx.eval([fn(j) for j in range(LAYERS)])
                    ms = 1e3 * (time.perf_counter() - t)
                    if r or i:
                        times[name].append(ms)
        result[L] = {w: round(statistics.median(v), 3) for w, v in times.items()}
        result[L]["errors"] = errors
        print(L, result[L], flush=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
