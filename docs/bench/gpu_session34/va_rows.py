"""The verify-attention kernel's value pass, rows loaded VROWS at a time, against the kernel of
session 33 (its value rows loaded one at a time, `serial_values_source.py`): the outputs must be
bit-equal (the arithmetic is the same, in the same order), and ms per call in groups of calls.
One query takes the per-head layout, several the grouped one, as the engine routes them.

    python va_rows.py [--other-sizes] --json out.json   # with serial_values_source.py beside it
"""

# ruff: noqa: B023 - the closures run inside the loop iteration that made them

from __future__ import annotations

# isort: off
import engine  # noqa: F401  (OpenBLAS before MLX, where it matters)

# isort: on
import argparse
import itertools
import json

import mlx.core as mx
import serial_values_source as serial

from engine.bench.attention_check import per_call_ms, verify_mask
from engine.kernels import verify_attention_cuda as vac

ROWS = (1, 2, 4, 8)  # 16 ran in this session's calls (data/), since withdrawn


def serial_kernel(grouped: bool):
    source = serial.GROUPED_SOURCE if grouped else serial.PER_HEAD_SOURCE
    return mx.fast.cuda_kernel(
        name="session33_verify_attention" + ("_grouped" if grouped else ""),
        input_names=["q", "k", "v", "mask", "scale"],
        output_names=["out"],
        source=source,
    )


SERIAL: dict = {}  # grouped or not: built on first use (MLX has no CUDA back-end on a CPU)


def serial_attention(q, k, v, *, scale, mask):
    B, Hq, N, D = q.shape
    heads = vac.heads_per_block(Hq // k.shape[1], N)
    template = [("T", q.dtype), ("D", D), ("WARPS", vac.WARPS)]
    if heads > 1:
        template.append(("HEADS", heads))
    grouped = heads > 1
    if grouped not in SERIAL:
        SERIAL[grouped] = serial_kernel(grouped)
    (out,) = SERIAL[grouped](
        inputs=[q, k, v, mask, mx.array([scale], dtype=mx.float32)],
        template=template,
        grid=(B * (Hq // heads) * N * vac.WARPS * 32, 1, 1),
        threadgroup=(vac.WARPS * 32, 1, 1),
        output_shapes=[(B, Hq, N, D)],
        output_dtypes=[q.dtype],
    )
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--json", default=None)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument(
        "--other-sizes",
        action="store_true",
        help="also head sizes 256 and 96 (bfloat16, float32) and float16 at 128",
    )
    args = p.parse_args()
    vac.uninstall()
    vac.set_grouping(False, verify=True)  # as the engine routes: grouped for several queries
    rows = []
    shapes = list(
        itertools.product(
            (1, 4, 16, 32),
            (1, 5, 9, 17),
            (256, 512, 2048),
            ((32, 8, 128), (32, 8, 64)),
            ("bfloat16",),
        )
    )
    if args.other_sizes:  # the word widths the default shapes never take, at fewer points
        shapes += itertools.product(
            (1, 16), (1, 5), (256, 2048), ((8, 4, 256), (32, 8, 96)), ("bfloat16", "float32")
        )
        shapes += itertools.product((1, 16), (1, 5), (256,), ((32, 8, 128),), ("float16",))
    for batch, n, keys, (hq, hk, d), dtype_name in shapes:
        rnd = mx.random.normal
        dtype = getattr(mx, dtype_name)
        q = rnd((batch, hq, n, d), key=mx.random.key(1)).astype(dtype)
        k = rnd((batch, hk, keys, d), key=mx.random.key(2)).astype(dtype)
        v = rnd((batch, hk, keys, d), key=mx.random.key(3)).astype(dtype)
        mask = verify_mask(batch, n, keys)
        scale = d**-0.5
        row = dict(
            batch=batch, n=n, keys=keys, d=d, dtype=dtype_name, default_rows=vac.value_rows(d)
        )
        want = serial_attention(q, k, v, scale=scale, mask=mask)
        row["serial_ms"] = round(
            per_call_ms(lambda: serial_attention(q, k, v, scale=scale, mask=mask), args.repeats), 4
        )
        for r in ROWS:
            got = vac.verify_attention(q, k, v, scale=scale, mask=mask, rows_at_once=r)
            equal = bool(mx.array_equal(got, want).item())
            if not equal:  # how far, and where: NaNs in either, elements apart
                apart = mx.abs(got.astype(mx.float32) - want.astype(mx.float32))
                print(
                    f"  rows {r}: {int((apart > 0).sum().item())} of {got.size} elements apart,"
                    f" at most {apart.max().item():.3g}; NaNs"
                    f" {int(mx.isnan(got).sum().item())} / {int(mx.isnan(want).sum().item())}",
                    flush=True,
                )
            ms = per_call_ms(
                lambda: vac.verify_attention(q, k, v, scale=scale, mask=mask, rows_at_once=r),
                args.repeats,
            )
            row[f"rows{r}"] = (round(ms, 4), equal)
        rows.append(row)
        cells = " ".join(
            f"r{r}={row[f'rows{r}'][0]:.4f}{'' if row[f'rows{r}'][1] else '!DIFF'}" for r in ROWS
        )
        print(
            f"B={batch:2d} N={n:2d} L={keys:5d} D={d:3d} {dtype_name} serial={row['serial_ms']:.4f}"
            f" {cells}",
            flush=True,
        )
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
