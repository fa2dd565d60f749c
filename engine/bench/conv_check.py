"""Checks the CUDA depthwise-convolution kernel against `mx.conv1d` (cuDNN) and times both, alone
and inside a hybrid model's forward at batch sizes it has not seen yet.

    python -m engine.bench.conv_check --json PATH [--model random:hybrid-1b]

Each case is recorded on its own: one failing case never hides the others. Without CUDA it says
so and exits 0.
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
import mlx.nn as nn

from engine.bench.cli_args import positive_int
from engine.bench.process_exit import run_and_exit
from engine.kernels import depthwise_conv_cuda as dcc

DEFAULT_BATCHES = (1, 4, 16, 32)
DEFAULT_STEPS = (1, 5, 64)
DEFAULT_CHANNELS = 8192  # Qwen3.5-shaped conv_dim (q, k and v of the linear attention)
DEFAULT_TAPS = 4
DEFAULT_REPEATS = 20
DEFAULT_MODEL_BATCHES = (3, 5, 6, 7, 9, 10, 11)  # batch sizes a forward meets for the first time
DEFAULT_MODEL_WIDTH = 5


@dataclass
class CaseResult:
    batch: int
    steps: int
    dtype: str
    ok: bool = False
    equal_fraction: float | None = None  # outputs bitwise equal to cuDNN's
    max_abs: float | None = None
    kernel_ms: float | None = None
    cudnn_ms: float | None = None
    error: str | None = None


def _timed(fn: Any, repeats: int) -> float:
    mx.eval(fn())
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        mx.eval(fn())
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e3


def check_case(batch: int, steps: int, dtype: mx.Dtype, repeats: int) -> CaseResult:
    result = CaseResult(batch, steps, str(dtype).rsplit(".", 1)[-1])
    try:
        conv = nn.Conv1d(
            DEFAULT_CHANNELS,
            DEFAULT_CHANNELS,
            DEFAULT_TAPS,
            groups=DEFAULT_CHANNELS,
            bias=False,
        )
        conv.set_dtype(dtype)
        x = mx.random.normal((batch, steps + DEFAULT_TAPS - 1, DEFAULT_CHANNELS)).astype(dtype)
        if not dcc.eligible(conv, x):
            raise RuntimeError("the kernel does not take this case")
        ref = mx.conv1d(x, conv.weight, groups=DEFAULT_CHANNELS)
        out = dcc.depthwise_conv_cuda(x, conv.weight)
        equal = mx.mean((out == ref).astype(mx.float32)).item()
        result.equal_fraction = equal
        result.max_abs = mx.max(mx.abs(out.astype(mx.float32) - ref.astype(mx.float32))).item()
        result.ok = out.shape == ref.shape and result.max_abs <= (
            1e-5 if dtype == mx.float32 else 0.02
        )
        result.kernel_ms = _timed(lambda: dcc.depthwise_conv_cuda(x, conv.weight), repeats)
        result.cudnn_ms = _timed(
            lambda: mx.conv1d(x, conv.weight, groups=DEFAULT_CHANNELS), repeats
        )
    except Exception as exc:  # noqa: BLE001 - recorded, the next case still runs
        result.error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return result


def new_shape_costs(model_spec: str, batches: tuple[int, ...], width: int) -> dict[str, Any]:
    """The hybrid model's forward over [B, width] at batch sizes met for the first time, then
    again, with the kernel (after) and with cuDNN (before), in one process."""
    from mlx_lm.models.cache import make_prompt_cache

    from engine.models import load_model

    model = load_model(model_spec).model
    out: dict[str, Any] = {"model": model_spec, "width": width, "batches": list(batches)}
    for label, kernel in (("cudnn", False), ("kernel", True)):
        (dcc.install if kernel else dcc.uninstall)()
        first, again = [], []
        for b in batches:
            b_shape = b + (100 if kernel else 0)  # a size neither pass has met
            for samples in (first, again):
                cache = make_prompt_cache(model)
                x = mx.ones((b_shape, width), dtype=mx.uint32)
                mx.synchronize()
                start = time.perf_counter()
                mx.eval(model(x, cache=cache))
                samples.append((time.perf_counter() - start) * 1e3)
        out[label] = {"first_ms": first, "again_ms": again}
    dcc.install()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--repeats", type=positive_int, default=DEFAULT_REPEATS)
    p.add_argument("--model", default=None, help="also time a model's new-shape forwards")
    args = p.parse_args(argv)
    if not dcc.install():
        print("no CUDA kernel here (CPU or Metal, or turned off): nothing to check")
        return 0
    results = [
        check_case(b, t, dtype, args.repeats)
        for b, t, dtype in itertools.product(
            DEFAULT_BATCHES, DEFAULT_STEPS, (mx.bfloat16, mx.float16, mx.float32)
        )
    ]
    for r in results:
        print(
            f"B={r.batch:>3} T={r.steps:>3} {r.dtype:>8}: ok={r.ok} equal={r.equal_fraction} "
            f"max_abs={r.max_abs} kernel={r.kernel_ms} ms cudnn={r.cudnn_ms} ms"
            + (f" ERROR {r.error}" if r.error else "")
        )
    report: dict[str, Any] = {"cases": [asdict(r) for r in results]}
    if args.model:
        report["new_shapes"] = costs = new_shape_costs(
            args.model, DEFAULT_MODEL_BATCHES, DEFAULT_MODEL_WIDTH
        )
        for label in ("cudnn", "kernel"):
            print(label, {k: [round(v, 1) for v in vs] for k, vs in costs[label].items()})
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    run_and_exit(main)
