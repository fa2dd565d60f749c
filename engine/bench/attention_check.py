"""Checks the CUDA verify-attention kernel against MLX's `scaled_dot_product_attention` (cuDNN
with a mask) and times both, per shape, with masks like a verify round's (left padding, holes,
the buffer's unwritten tail, causal among the new queries).

    python -m engine.bench.attention_check --json PATH

checks the layouts the engine uses: grouped blocks for several queries (one head a block with
TANDEM_PER_HEAD_VERIFY_ATTENTION=1), one head a block for one query (grouped with
TANDEM_GROUPED_ATTENTION=1).

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

import mlx.core as mx

from engine.bench.cli_args import positive_int
from engine.bench.process_exit import run_and_exit
from engine.device import on_cuda
from engine.kernels import verify_attention_cuda as vac
from engine.kernels.switch import is_set

DEFAULT_BATCHES = (1, 4, 16)
DEFAULT_QUERIES = (2, 5, 9, 17)
DEFAULT_KEYS = (256, 1024, 4096)
DEFAULT_HEADS = ((32, 8, 64), (16, 4, 128))  # query heads, key heads, head size
DEFAULT_DTYPES = ("bfloat16", "float16", "float32")
DEFAULT_REPEATS = 20
LAYERS = 16  # calls per timed group: a model's worth, so launch gaps show as they would


@dataclass
class CaseResult:
    batch: int
    queries: int
    keys: int
    heads: tuple[int, int, int]
    dtype: str
    taken: bool | None = None  # whether the engine routes this call to the kernel (vac.takes)
    max_abs_error: float | None = None
    mlx_error: float | None = None  # MLX's own error against the float32 reference
    kernel_ms: float | None = None  # per call, a group of LAYERS calls evaluated at once
    mlx_ms: float | None = None
    error: str | None = None


def verify_mask(batch: int, queries: int, keys: int) -> mx.array:
    """[B, 1, N, L]: row b has b * 7 % 40 positions of left padding, a hole of 3 positions in
    odd rows, then real positions up to L - 64 - N, the new queries causal among themselves,
    and an unwritten tail."""
    written = keys - 64
    pos = mx.arange(keys)[None, None, :]
    query_pos = (written - queries + mx.arange(queries))[None, :, None]
    pad = (mx.arange(batch) * 7 % 40)[:, None, None]
    hole = ((mx.arange(batch) % 2) == 1)[:, None, None] & (pos >= pad + 5) & (pos < pad + 8)
    mask = (pos >= pad) & (pos <= query_pos) & ~hole
    return mask[:, None]


def min_keys(batches: int, queries: int) -> int:
    """The fewest keys with which verify_mask leaves every query of every row a key to attend
    to (a row of only masked keys is NaN in the reference): the unwritten tail, the queries,
    the left padding."""
    return 64 + queries + max(b * 7 % 40 for b in range(batches))


def reference(q, k, v, scale, mask) -> mx.array:
    """float32 attention, masked keys at -inf."""
    group = q.shape[1] // k.shape[1]
    k = mx.repeat(k.astype(mx.float32), group, axis=1)
    v = mx.repeat(v.astype(mx.float32), group, axis=1)
    scores = (q.astype(mx.float32) * scale) @ k.swapaxes(-1, -2)
    scores = mx.where(mask, scores, -mx.inf)
    return mx.softmax(scores, axis=-1) @ v


def per_call_ms(fn, repeats: int) -> float:
    mx.eval([fn() for _ in range(LAYERS)])
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        mx.eval([fn() for _ in range(LAYERS)])
        times.append((time.perf_counter() - start) / LAYERS)
    return 1e3 * statistics.median(times)


def check_case(batch, queries, keys, heads, dtype_name, repeats) -> CaseResult:
    result = CaseResult(batch, queries, keys, heads, dtype_name)
    try:
        hq, hk, d = heads
        dtype = getattr(mx, dtype_name)
        rnd = mx.random.normal
        q = rnd((batch, hq, queries, d), key=mx.random.key(1)).astype(dtype)
        k = rnd((batch, hk, keys, d), key=mx.random.key(2)).astype(dtype)
        v = rnd((batch, hk, keys, d), key=mx.random.key(3)).astype(dtype)
        mask = verify_mask(batch, queries, keys)
        scale = d**-0.5
        result.taken = vac.takes(q, k, v, mask)  # timed either way: where the line should be
        vac.uninstall()
        want = reference(q, k, v, scale, mask)
        mlx_out = mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)
        got = vac.verify_attention(q, k, v, scale=scale, mask=mask)
        result.max_abs_error = mx.abs(got.astype(mx.float32) - want).max().item()
        result.mlx_error = mx.abs(mlx_out.astype(mx.float32) - want).max().item()
        result.kernel_ms = per_call_ms(
            lambda: vac.verify_attention(q, k, v, scale=scale, mask=mask), repeats
        )
        result.mlx_ms = per_call_ms(
            lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask), repeats
        )
    except Exception:  # noqa: BLE001 - recorded; the other cases still run
        result.error = traceback.format_exc(limit=3)
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--repeats", type=positive_int, default=DEFAULT_REPEATS)
    p.add_argument("--batches", type=positive_int, nargs="+", default=list(DEFAULT_BATCHES))
    p.add_argument("--queries", type=positive_int, nargs="+", default=list(DEFAULT_QUERIES))
    p.add_argument("--keys", type=positive_int, nargs="+", default=list(DEFAULT_KEYS))
    p.add_argument("--dtypes", nargs="+", default=list(DEFAULT_DTYPES))
    args = p.parse_args(argv)
    fewest = min_keys(max(args.batches), max(args.queries))
    if min(args.keys) < fewest:
        p.error(
            f"--keys must be >= {fewest} for --batches up to {max(args.batches)} and --queries "
            f"up to {max(args.queries)} (64 unwritten, the queries, up to 39 of left padding)"
        )
    if not on_cuda():
        print("no CUDA GPU here: the verify-attention kernel is CUDA only; nothing to check")
        return 0
    # the layouts the engine would use
    vac.set_grouping(is_set(vac.GROUPED_ENV), verify=not is_set(vac.PER_HEAD_VERIFY_ENV))
    cases = itertools.product(args.batches, args.queries, args.keys, DEFAULT_HEADS, args.dtypes)
    results = []
    for batch, queries, keys, heads, dtype in cases:
        r = check_case(batch, queries, keys, heads, dtype, args.repeats)
        results.append(r)
        timing = (
            f"kernel {r.kernel_ms:.3f} ms, MLX {r.mlx_ms:.3f} ms"
            if r.kernel_ms is not None
            else (r.error or "").strip().splitlines()[-1:]
        )
        print(
            f"B={batch:2d} N={queries:2d} L={keys:5d} heads={heads} {dtype:8s} "
            f"{'kernel' if r.taken else 'MLX'} in the engine: error "
            f"{r.max_abs_error} (MLX {r.mlx_error}); {timing}",
            flush=True,
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))
    return 0


if __name__ == "__main__":
    run_and_exit(main)
