"""The verify-attention kernel's layouts against each other and MLX (cuDNN with a mask), per
shape: one block per head and query, and per group of heads that share a key head. Error
against a float32 reference; ms per call in groups of 16 calls.

Session 32 ran it (data/va_layouts_h100.*) with a third layout since reverted, "query blocks":
a block per group of heads x a chunk of a row's queries (2-8, within 64 or 128 accumulator
floats a lane), reading each key once for them all. It was slower than grouped heads at five
queries or more (docs/benchmarks.md, twenty-seventh pass).

    python va_layouts.py --json out.json
"""

# ruff: noqa: B023 - the closures run inside the loop iteration that made them

from __future__ import annotations

import argparse
import itertools
import json

import mlx.core as mx

from engine.bench.attention_check import per_call_ms, reference, verify_mask
from engine.kernels import verify_attention_cuda as vac

LAYOUTS = {"per-head": False, "grouped": True}  # name: grouped heads for several queries


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--json", default=None)
    p.add_argument("--repeats", type=int, default=10)
    args = p.parse_args()
    vac.uninstall()
    rows = []
    shapes = itertools.product(
        (1, 4, 16, 32), (2, 5, 9, 17), (256, 512, 2048), ((32, 8, 128), (32, 8, 64))
    )
    for batch, n, keys, (hq, hk, d) in shapes:
        rnd = mx.random.normal
        q = rnd((batch, hq, n, d), key=mx.random.key(1)).astype(mx.bfloat16)
        k = rnd((batch, hk, keys, d), key=mx.random.key(2)).astype(mx.bfloat16)
        v = rnd((batch, hk, keys, d), key=mx.random.key(3)).astype(mx.bfloat16)
        mask = verify_mask(batch, n, keys)
        scale = d**-0.5
        want = reference(q, k, v, scale, mask)
        row = dict(batch=batch, n=n, keys=keys, d=d)
        row["mlx_ms"] = round(
            per_call_ms(
                lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask),
                args.repeats,
            ),
            4,
        )
        for name, grouped in LAYOUTS.items():
            vac.set_grouping(False, verify=grouped)
            try:
                got = vac.verify_attention(q, k, v, scale=scale, mask=mask)
                err = mx.abs(got.astype(mx.float32) - want).max().item()
                ms = per_call_ms(
                    lambda: vac.verify_attention(q, k, v, scale=scale, mask=mask), args.repeats
                )
                row[name] = (round(ms, 4), round(err, 4), vac.heads_per_block(hq // hk, n))
            except Exception as exc:  # noqa: BLE001
                row[name] = repr(exc)[:200]
        rows.append(row)
        cells = " ".join(
            f"{nm}={row[nm][0]:.3f}/{row[nm][1]:.3f}" if isinstance(row[nm], tuple) else f"{nm}=ERR"
            for nm in LAYOUTS
        )
        print(
            f"B={batch:2d} N={n:2d} L={keys:5d} D={d:3d} mlx={row['mlx_ms']:.3f} {cells}",
            flush=True,
        )
        errs = [row[nm] for nm in LAYOUTS if not isinstance(row[nm], tuple)]
        if errs:
            print("  ", errs[0], flush=True)
    vac.set_grouping(False)
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
