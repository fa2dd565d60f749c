"""Checks the CUDA gated-delta kernel against mlx-lm's `gated_delta_ops` and times both.

    python -m engine.bench.gated_delta_check --json PATH

Shapes follow Qwen3.5's linear-attention layers (Hk=16, Hv=32, Dk=Dv=128) at the batch sizes and
verify lengths the engine feeds. Each case is recorded on its own: one failing case never hides
the others. Without CUDA it says so and exits 0.
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
from typing import Any

import mlx.core as mx

from engine.bench.cli_args import positive_int
from engine.kernels import gated_delta_cuda as gdc

DEFAULT_BATCHES = (1, 4, 32)
DEFAULT_STEPS = (1, 5, 9, 64)
DEFAULT_HEADS = (16, 32)  # Hk, Hv
DEFAULT_DIMS = (128, 128)  # Dk, Dv
DEFAULT_REPEATS = 20
DEFAULT_WARMUP = 2
F32_ATOL = 1e-3
BF16_RTOL = (
    2.0**-6
)  # two bf16 ulps: both sides round a float32 result that differs in the last bits


@dataclass
class CaseResult:
    batch: int
    steps: int
    gate: str  # "scalar" [B, T, Hv] or "vector" [B, T, Hv, Dk]
    masked: bool
    dtype: str  # q, k, v, beta; g and the state are float32 as in the models
    ok: bool = False
    eligible: bool | None = None
    y_max_abs: float | None = None
    state_max_abs: float | None = None
    kernel_ms: float | None = None
    ops_ms: float | None = None
    speedup: float | None = None
    error: str | None = None


def _original_ops() -> Any:
    from mlx_lm.models import gated_delta

    return getattr(gated_delta.gated_delta_ops, "tandem_original", gated_delta.gated_delta_ops)


def ragged_mask(batch: int, steps: int) -> mx.array:
    """Rows feed 0..T tokens; even rows are right-padded, odd rows left-padded."""
    rows = []
    for b in range(batch):
        n = steps - (b * 3) % (steps + 1)
        rows.append([t < n if b % 2 == 0 else t >= steps - n for t in range(steps)])
    return mx.array(rows, dtype=mx.bool_)


def make_inputs(
    batch: int, steps: int, *, vector_gate: bool, masked: bool, dtype: mx.Dtype, seed: int = 0
) -> tuple[mx.array, ...]:
    """Random inputs with the magnitudes the models produce (unit-norm q and k, gates in (0, 1))."""
    hk, hv = DEFAULT_HEADS
    dk, dv = DEFAULT_DIMS
    keys = mx.random.split(mx.random.key(seed), 7)

    def unit(x: mx.array) -> mx.array:
        return x / mx.linalg.norm(x, axis=-1, keepdims=True)

    q = unit(mx.random.normal((batch, steps, hk, dk), key=keys[0])).astype(dtype)
    k = unit(mx.random.normal((batch, steps, hk, dk), key=keys[1])).astype(dtype)
    v = mx.random.normal((batch, steps, hv, dv), key=keys[2]).astype(dtype)
    g_shape = (batch, steps, hv, dk) if vector_gate else (batch, steps, hv)
    g = mx.random.uniform(0.7, 1.0, g_shape, key=keys[3])
    beta = mx.sigmoid(mx.random.normal((batch, steps, hv), key=keys[4])).astype(dtype)
    state = 0.5 * mx.random.normal((batch, hv, dv, dk), key=keys[5])
    mask = ragged_mask(batch, steps) if masked else None
    arrays = (q, k, v, g, beta, state, mask)
    mx.eval(*[a for a in arrays if a is not None])
    return arrays


def median_ms(fn: Any, *, repeats: int, warmup: int = DEFAULT_WARMUP) -> float:
    """Median wall time of `fn` in ms, each run waited for with mx.eval."""
    for _ in range(warmup):
        mx.eval(*fn())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        mx.eval(*fn())
        times.append(time.perf_counter() - start)
    return 1000.0 * statistics.median(times)


def run_case(
    batch: int, steps: int, gate: str, masked: bool, dtype_name: str, *, repeats: int
) -> CaseResult:
    """Compare and time one shape; any exception is recorded in the result."""
    result = CaseResult(batch, steps, gate, masked, dtype_name)
    try:
        dtype = getattr(mx, dtype_name)
        q, k, v, g, beta, state, mask = make_inputs(
            batch, steps, vector_gate=gate == "vector", masked=masked, dtype=dtype
        )
        ops = _original_ops()
        result.eligible = gdc.eligible(q, k, v, g, beta, state, mask)
        y_ref, s_ref = ops(q, k, v, g, beta, state, mask)
        y_ker, s_ker = gdc.gated_delta_cuda(q, k, v, g, beta, state, mask)
        mx.eval(y_ref, s_ref, y_ker, s_ker)
        if y_ker.shape != y_ref.shape or y_ker.dtype != y_ref.dtype:
            raise AssertionError(f"y is {y_ker.shape} {y_ker.dtype}, ops gave {y_ref.shape}")
        if s_ker.shape != s_ref.shape or s_ker.dtype != s_ref.dtype:
            raise AssertionError(f"state is {s_ker.shape} {s_ker.dtype}, ops gave {s_ref.dtype}")
        y_ref32, y_ker32 = y_ref.astype(mx.float32), y_ker.astype(mx.float32)
        if mask is not None:
            # The ops path still computes y at masked steps; the kernel (like mlx-lm's Metal
            # kernel) writes 0 there. Padding outputs are never read, so compare real steps.
            keep = mask[:, :, None, None]
            y_ref32 = mx.where(keep, y_ref32, 0.0)
            masked_y = mx.where(keep, 0.0, y_ker32)
            if mx.max(mx.abs(masked_y)).item() != 0.0:
                raise AssertionError("kernel wrote a non-zero y at a masked step")
            y_ker32 = mx.where(keep, y_ker32, 0.0)
        y_diff = mx.abs(y_ker32 - y_ref32)
        result.y_max_abs = mx.max(y_diff).item()
        result.state_max_abs = mx.max(mx.abs(s_ker - s_ref)).item()
        rtol = 0.0 if dtype == mx.float32 else BF16_RTOL
        y_ok = mx.all(y_diff <= F32_ATOL + rtol * mx.abs(y_ref32)).item()
        result.ok = bool(y_ok and result.state_max_abs < F32_ATOL and result.eligible)
        result.kernel_ms = median_ms(
            lambda: gdc.gated_delta_cuda(q, k, v, g, beta, state, mask), repeats=repeats
        )
        result.ops_ms = median_ms(lambda: ops(q, k, v, g, beta, state, mask), repeats=repeats)
        result.speedup = result.ops_ms / result.kernel_ms if result.kernel_ms else None
    except Exception as exc:  # recorded, so the other cases still run
        result.ok = False
        result.error = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    return result


def check_route() -> dict[str, Any]:
    """install() must reach mlx-lm's gated_delta_update and give what the original ops give."""
    from mlx_lm.models import gated_delta

    out: dict[str, Any] = {"ok": False}
    try:
        B, T = 4, 9
        hk, hv = DEFAULT_HEADS
        q, k, v, _, _, state, mask = make_inputs(
            B, T, vector_gate=False, masked=True, dtype=mx.bfloat16, seed=1
        )
        keys = mx.random.split(mx.random.key(2), 4)
        a = mx.random.normal((B, T, hv), key=keys[0]).astype(mx.bfloat16)
        b = mx.random.normal((B, T, hv), key=keys[1]).astype(mx.bfloat16)
        a_log = mx.random.uniform(-1.0, 1.0, (hv,), key=keys[2])
        dt_bias = mx.random.uniform(-1.0, 1.0, (hv,), key=keys[3])
        args = (q, k, v, a, b, a_log, dt_bias, state, mask)
        gdc.uninstall()
        y_ref, s_ref = gated_delta.gated_delta_update(*args)
        out["installed"] = gdc.install()
        out["dispatcher_in_place"] = gdc.is_installed()
        calls = []
        real = gdc.gated_delta_cuda

        def counting(*call_args: Any) -> tuple[mx.array, mx.array]:
            calls.append(1)
            return real(*call_args)

        gdc.gated_delta_cuda = counting  # type: ignore[assignment]
        try:
            y, s = gated_delta.gated_delta_update(*args)
        finally:
            gdc.gated_delta_cuda = real  # type: ignore[assignment]
        keep = mask[:, :, None, None]
        y_diff = mx.where(keep, y.astype(mx.float32) - y_ref.astype(mx.float32), 0.0)
        out["kernel_calls"] = len(calls)
        out["y_max_abs"] = mx.max(mx.abs(y_diff)).item()
        out["state_max_abs"] = mx.max(mx.abs(s - s_ref)).item()
        out["ok"] = bool(
            out["installed"]
            and len(calls) == 1
            and out["state_max_abs"] < F32_ATOL
            and out["y_max_abs"] < F32_ATOL + BF16_RTOL * mx.max(mx.abs(y_ref)).item()
        )
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    return out


def _device_name() -> str | None:
    try:
        return str(mx.device_info().get("device_name"))
    except Exception:  # not every MLX build has device_info
        return None


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


TABLE_HEAD = (
    f"{'B':>3} {'T':>3} {'gate':6} {'mask':5} {'dtype':8} {'ok':3} "
    f"{'y err':>9} {'state err':>9} {'kernel ms':>9} {'ops ms':>9} {'x':>6}"
)


def table_row(r: CaseResult) -> str:
    """One case: errors, times and the speedup over mlx-lm's ops loop."""
    line = f"{r.batch:>3} {r.steps:>3} {r.gate:6} {str(r.masked):5} {r.dtype:8} "
    line += f"{'yes' if r.ok else 'NO':3} {_fmt(r.y_max_abs, '9.2e')} "
    line += f"{_fmt(r.state_max_abs, '9.2e')} {_fmt(r.kernel_ms, '9.3f')} "
    line += f"{_fmt(r.ops_ms, '9.3f')} {_fmt(r.speedup, '6.1f')}"
    return line + (f"  {r.error}" if r.error else "")


def main(argv: list[str] | None = None) -> int:
    """Run every case, print the table, write the JSON; exit 1 if any case failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--repeats", type=positive_int, default=DEFAULT_REPEATS)
    parser.add_argument("--quick", action="store_true", help="B=4, T=9 only")
    args = parser.parse_args(argv)

    if not gdc.cuda_available():
        print("CUDA is not available here: nothing to check (the kernel is CUDA-only).")
        if args.json:
            args.json.write_text(json.dumps({"cuda": False}, indent=2) + "\n")
        return 0
    mx.set_default_device(mx.gpu)
    batches, steps = ((4,), (9,)) if args.quick else (DEFAULT_BATCHES, DEFAULT_STEPS)
    grid = itertools.product(batches, steps, ("scalar", "vector"), (False, True))
    results = []
    print(TABLE_HEAD, flush=True)
    for (batch, t, gate, masked), dtype_name in itertools.product(grid, ("float32", "bfloat16")):
        results.append(run_case(batch, t, gate, masked, dtype_name, repeats=args.repeats))
        print(table_row(results[-1]), flush=True)
    route = check_route()
    print(f"route through mlx_lm gated_delta_update: {route}")
    all_ok = all(r.ok for r in results) and route["ok"]
    print("ALL OK" if all_ok else "FAILURES: see the rows marked NO")
    if args.json:
        report = {
            "cuda": True,
            "mlx": mx.__version__,
            "device": _device_name(),
            "all_ok": all_ok,
            "route": route,
            "cases": [asdict(r) for r in results],
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if all_ok else 1


if __name__ == "__main__":
    from engine.bench.process_exit import run_and_exit

    run_and_exit(main)
