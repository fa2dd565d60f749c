"""Checks the CUDA skinny-matmul kernel against MLX's `x @ w.T` (cuBLASLt for several rows, its
matrix-vector kernel for one) and times both, per row count and weight shape, for each of a few
launch shapes (columns per warp, warps per block).

    python -m engine.bench.matmul_check --json PATH

The weights are the 1B's and 8B's (random:1b / random:8b) projections and output layer. Each
timed group multiplies by LAYERS different weights, so no weight is served from the GPU's L2 cache
as it would not be in a model. Each case is recorded on its own: one failing case never hides the
others. Without CUDA it says so and exits 0.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

import mlx.core as mx

from engine.bench.cli_args import positive_int
from engine.bench.process_exit import run_and_exit
from engine.device import on_cuda
from engine.kernels import skinny_matmul_cuda as smc

DEFAULT_ROWS = (1, 2, 4, 5, 8, 10, 16, 20, 32)
MAX_TIMED_ROWS = 32  # past the engine's MAX_ROWS too: where the line should be
# (in, out): the 8B's q / o, k / v, gate / up, down, output layer; the 1B's q, gate, down
DEFAULT_SHAPES = (
    (4096, 4096),
    (4096, 1024),
    (4096, 14336),
    (14336, 4096),
    (4096, 49152),
    (2048, 2048),
    (2048, 8192),
    (8192, 2048),
)
DEFAULT_LAUNCHES = ((1, 4), (2, 4), (4, 4), (2, 8), (4, 8))  # (columns per warp, warps)
DEFAULT_DTYPES = ("bfloat16",)
DEFAULT_REPEATS = 10
LAYERS = 8


@dataclass
class CaseResult:
    rows: int
    k: int
    n: int
    dtype: str
    cols: int
    warps: int
    taken: bool | None = None  # whether the engine routes this call to the kernel (smc.takes)
    max_abs_error: float | None = None  # against a float32 reference
    mlx_error: float | None = None  # MLX's own error against it
    kernel_ms: float | None = None  # per call
    mlx_ms: float | None = None
    mlx_wx_ms: float | None = None  # the same product as (w @ x.T), left transposed
    kernel_gb_s: float | None = None  # weight bytes read per second
    error: str | None = None


def per_call_ms(fn, weights: list[mx.array], repeats: int) -> float:
    mx.eval([fn(w) for w in weights])
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        mx.eval([fn(w) for w in weights])
        times.append((time.perf_counter() - start) / len(weights))
    return 1e3 * statistics.median(times)


def check_shape(rows, k, n, dtype_name, launches, repeats) -> list[CaseResult]:
    dtype = getattr(mx, dtype_name)
    results = [CaseResult(rows, k, n, dtype_name, c, w) for c, w in launches]
    try:
        x = (mx.random.normal((rows, k), key=mx.random.key(1)) * k**-0.5).astype(dtype)
        weights = [
            mx.random.normal((n, k), key=mx.random.key(2 + i)).astype(dtype) for i in range(LAYERS)
        ]
        mx.eval(x, weights)
        want = x.astype(mx.float32) @ weights[0].astype(mx.float32).T
        mlx_error = mx.abs((x @ weights[0].T).astype(mx.float32) - want).max().item()
        mlx_ms = per_call_ms(lambda w: x @ w.T, weights, repeats)
        # cuBLASLt picks its kernel by shape: the few rows as the product's columns instead
        mlx_wx_ms = per_call_ms(lambda w: w @ x.T, weights, repeats)
    except Exception:  # noqa: BLE001 - recorded; the other shapes still run
        for r in results:
            r.error = traceback.format_exc(limit=3)
        return results
    for r in results:
        try:
            r.taken = smc.takes(x, weights[0])
            r.mlx_error, r.mlx_ms, r.mlx_wx_ms = mlx_error, mlx_ms, mlx_wx_ms
            if rows < smc.MIN_ROWS or rows > MAX_TIMED_ROWS:
                continue  # one row is MLX's matrix-vector kernel: its time only

            def run(w, r=r):
                return smc.skinny_matmul(x, w, cols=r.cols, warps=r.warps)

            got = run(weights[0]).astype(mx.float32)
            r.max_abs_error = mx.abs(got - want).max().item()
            r.kernel_ms = per_call_ms(run, weights, repeats)
            r.kernel_gb_s = round(n * k * x.dtype.size / r.kernel_ms / 1e6, 1)
        except Exception:  # noqa: BLE001
            r.error = traceback.format_exc(limit=3)
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--repeats", type=positive_int, default=DEFAULT_REPEATS)
    p.add_argument("--rows", type=positive_int, nargs="+", default=list(DEFAULT_ROWS))
    p.add_argument("--dtypes", nargs="+", default=list(DEFAULT_DTYPES))
    p.add_argument("--quick", action="store_true", help="the default launch shape only")
    args = p.parse_args(argv)
    if not on_cuda():
        print("no CUDA GPU here: the skinny-matmul kernel is CUDA only; nothing to check")
        return 0
    smc.uninstall()
    launches = [(smc.DEFAULT_COLS, smc.DEFAULT_WARPS)] if args.quick else DEFAULT_LAUNCHES
    results: list[CaseResult] = []
    for rows, (k, n), dtype in itertools.product(args.rows, DEFAULT_SHAPES, args.dtypes):
        for r in check_shape(rows, k, n, dtype, launches, args.repeats):
            results.append(r)
            timing = (
                f"kernel {r.kernel_ms:.4f} ms ({r.kernel_gb_s} GB/s), MLX {r.mlx_ms:.4f} ms"
                if r.kernel_ms is not None
                else f"MLX {r.mlx_ms} ms {(r.error or '').strip().splitlines()[-1:]}"
            )
            print(
                f"M={rows:2d} K={k:5d} N={n:5d} {dtype} cols={r.cols} warps={r.warps}: error "
                f"{r.max_abs_error} (MLX {r.mlx_error}); {timing}; w @ x.T {r.mlx_wx_ms} ms",
                flush=True,
            )
        if args.json:  # after every shape: a run cut short keeps what it measured
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))
    return 0


if __name__ == "__main__":
    run_and_exit(main)
