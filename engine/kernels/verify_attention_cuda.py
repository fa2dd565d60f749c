"""A CUDA kernel for masked attention of a few queries per row: verify forwards and the decode
steps of ragged batches.

A verify round feeds each row its pending token and its draft (2 to 17 queries), and the rows'
left padding, holes and the cache buffer's unwritten tail are hidden by a boolean mask; a plain
decode step of rows of different lengths (one query each) masks their left padding. MLX's CUDA
backend has a fused kernel for up to 3 queries without a mask; with a mask it goes through
cuDNN (several queries) or unfused matmuls and a softmax (one query), which cost far more on the
host and the GPU: measured on the H200, attention cost 0.14-0.22 ms per layer against 0.04-0.06
ms for the same queries without a mask (docs/benchmarks.md, fourth pass). Here one block
computes one query of one head: its warps take 32 keys at a time (a lane per key), skip masked
keys, and keep an online softmax in float32, as MLX's vector kernel does; where query heads
share a key head (grouped-query attention), one block can compute up to four of them and read
each key once for them all (engine/kernels/verify_attention_source.py): calls of several queries
take that layout, calls of one query only with TANDEM_GROUPED_ATTENTION=1 (it was not faster in
the engine's plain steps). `install()` routes
eligible `mx.fast.scaled_dot_product_attention` calls to it on CUDA, "causal" calls of 4-32
queries included (mlx-lm's own caches pass that; MLX sends them to cuDNN), and leaves every
other call to MLX.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import cache
from typing import Any

import mlx.core as mx

from engine.device import on_cuda
from engine.kernels.kernel_names import versioned_name
from engine.kernels.switch import is_set, may_install
from engine.kernels.verify_attention_source import GROUPED_SOURCE, PER_HEAD_SOURCE

DISABLE_ENV = "TANDEM_NO_VERIFY_ATTENTION"
MAX_QUERIES = 32  # the widest verify forward auto asks for is 17
MAX_KEYS = 8192  # past this the key loop of one block is longer than cuDNN's whole call
# A block reads its key head's keys for every query, so with several queries the kernel's time
# grows with the bytes it reads (`key_bytes_read`). One query head a block: on the H200 it beat
# cuDNN everywhere below 128M and lost from about 150M; on an H100 at 168M it won, tied and
# lost once each. A group of heads a block: on an H100 it beat cuDNN at up to 42M in every
# case, at 84M in four of five (a tie), and lost at 168M. With one query (a ragged batch's
# decode step) MLX's unfused path is dearer: the kernel was 2.3-4.1x faster in every case
# measured, up to B 32 x L 4096 (537M), so those are not limited (python -m
# engine.bench.attention_check; docs/benchmarks.md).
DEFAULT_MAX_BYTES = 128_000_000
DEFAULT_MAX_GROUPED_BYTES = 96_000_000
# ...but a one-query call through `mx.fast.cuda_kernel` costs the host more than MLX's own ops:
# at the engine's plain step MLX won on an H100 in six pairs of six where the kernel won on the
# H200; the engine can time both per batch size (engine/core/decode_attention_choice.py)
# "causal" calls of this many queries or more take the kernel: MLX's CUDA backend sends them to
# cuDNN (the 8B's 32 calls at 5 queries and 512 keys: 2.30 ms there, 0.71 in the kernel; its
# one-row 5-token forward 14.0 ms against 11.2 for five one-token rows; H100, docs/benchmarks.md,
# twenty-second pass)
MIN_CAUSAL_QUERIES = 4
DEFAULT_CAUSAL_MASKS_KEPT = 8
HEAD_DIMS = (64, 96, 128, 256)  # a whole number of floats per lane
WARPS = 8
# Query heads a block computes where they share a key head: on an H100 four a block beat eight
# for 64 heads on 8 (head size 64) by 10% and were level for 32 on 4 (head size 128)
MAX_HEADS_PER_BLOCK = 4
# One query (a ragged batch's decode step) takes grouped blocks only when asked: a call alone
# took 0.69x the per-head layout's time at 4-32 rows, but in the engine the 8B's plain step with
# four long rows took 18-20 ms against 15-17 per head (H100; docs/benchmarks.md, twentieth pass)
GROUPED_ENV = "TANDEM_GROUPED_ATTENTION"
# Several queries (a verify forward) take grouped blocks unless this is set: a median 0.77x the
# per-head layout's time at 4-32 rows (0.47-1.02x) over 2-17 queries and 256-2,048 keys, level
# at one row; at 16 rows x 5 queries x 256 keys 0.57x cuDNN's, where the per-head layout had left
# the call to cuDNN (H100; docs/benchmarks.md, twenty-seventh pass)
PER_HEAD_VERIFY_ENV = "TANDEM_PER_HEAD_VERIFY_ATTENTION"
FLOATS = (mx.float32, mx.float16, mx.bfloat16)
# Value rows a lane loads before adding any (the value pass, verify_attention_source.py): more
# loads in flight, more registers. As many rows as keep a lane's loaded values within this many
# (8 rows for heads of 64-128, 4 for 256). Against one row at a time, per call on an H100: a
# median 0.74x at 4-32 rows of several queries, 0.88x for one query (head size 128); 16 rows
# were no faster and once 1 bfloat16 step apart (docs/benchmarks.md, twenty-ninth pass).
VALUE_FLOATS_PER_LANE = 32
VALUE_ROWS = (1, 2, 4, 8)

SdpaFn = Callable[..., mx.array]
_kernels: dict[bool, Any] = {}  # grouped or not: MLX's compiled kernel objects
_causal = {"on": True}  # whether "causal" calls of a few queries take the kernel (`causal_calls`)
# by (queries, keys): the layers of one forward share one mask
_causal_masks: dict[tuple[int, int], mx.array] = {}
_one_query = {"on": True}  # whether one-query calls may take the kernel (`one_query_calls`)
_grouping = {"on": False}  # whether one-query blocks compute groups of heads (GROUPED_ENV)
_grouping_verify = {"on": True}  # whether several queries do (PER_HEAD_VERIFY_ENV)


@contextmanager
def _switched(switch: dict[str, bool], on: bool) -> Iterator[None]:
    before, switch["on"] = switch["on"], on
    try:
        yield
    finally:
        switch["on"] = before


def one_query_calls(on: bool) -> AbstractContextManager[None]:
    """Within this block, one-query calls take the kernel (`on`) or stay with MLX."""
    return _switched(_one_query, on)


def causal_calls(on: bool) -> AbstractContextManager[None]:
    """Within this block, calls with mask "causal" may take the kernel (`on`) or stay with MLX."""
    return _switched(_causal, on)


def causal_mask(queries: int, keys: int) -> mx.array | None:
    """The boolean mask [1, 1, queries, keys] MLX's "causal" means (the queries are the last
    positions), for calls of MIN_CAUSAL_QUERIES to MAX_QUERIES queries; else None."""
    if not _causal["on"] or not MIN_CAUSAL_QUERIES <= queries <= min(MAX_QUERIES, keys):
        return None
    mask = _causal_masks.get((queries, keys))
    if mask is None:
        if len(_causal_masks) >= DEFAULT_CAUSAL_MASKS_KEPT:
            _causal_masks.clear()
        ends = mx.arange(keys - queries, keys)[:, None]
        mask = _causal_masks[(queries, keys)] = (mx.arange(keys)[None] <= ends)[None, None]
    return mask


def kernel_source(*, heads: int = 1) -> str:
    """The CUDA source for blocks of `heads` query heads (1: the per-head layout)."""
    return PER_HEAD_SOURCE if heads == 1 else GROUPED_SOURCE


def set_grouping(on: bool, *, verify: bool = True) -> None:
    """Blocks of grouped query heads (`on`) or one head a block (the default) for one-query
    calls; `verify`: the same for calls of several queries (grouped by default)."""
    _grouping["on"] = on
    _grouping_verify["on"] = verify


def heads_per_block(group: int, queries: int = 1) -> int:
    """How many of a group's query heads (those sharing a key head) one block computes, for
    calls of `queries` queries: with grouping on for such calls, the largest power of two within
    MAX_HEADS_PER_BLOCK that divides the group; else one."""
    if not (_grouping_verify if queries > 1 else _grouping)["on"]:
        return 1
    heads = 1
    while heads * 2 <= MAX_HEADS_PER_BLOCK and group % (heads * 2) == 0:
        heads *= 2
    return heads


@cache  # called for every attention call of every layer: a few head sizes, worked out once
def value_rows(head_dim: int) -> int:
    """Value rows a lane loads at once for heads of `head_dim`: the most of VALUE_ROWS whose
    values fit in VALUE_FLOATS_PER_LANE (one row at least)."""
    per_lane = max(1, head_dim // 32)
    return max([1] + [r for r in VALUE_ROWS if r * per_lane <= VALUE_FLOATS_PER_LANE])


def key_bytes_read(q: mx.array, k: mx.array) -> int:
    """Bytes of keys the kernel reads for a call: each block reads its key head's keys once."""
    B, Hq, N, D = q.shape
    blocks = B * (Hq // heads_per_block(Hq // k.shape[1], N)) * N
    return blocks * k.shape[2] * D * q.dtype.size


def _name(grouped: bool) -> str:
    source = GROUPED_SOURCE if grouped else PER_HEAD_SOURCE
    return versioned_name("tandem_verify_attention" + ("_grouped" if grouped else ""), source)


def kernel_names() -> list[str]:
    """Every name this module's kernels are compiled under (engine/kernels/stale_kernels.py)."""
    return [_name(False), _name(True)]


def _kernel(grouped: bool) -> Any:
    kernel = _kernels.get(grouped)
    if kernel is None:
        source = GROUPED_SOURCE if grouped else PER_HEAD_SOURCE
        kernel = _kernels[grouped] = mx.fast.cuda_kernel(
            name=_name(grouped),
            input_names=["q", "k", "v", "mask", "scale"],
            output_names=["out"],
            source=source,
        )
    return kernel


def verify_attention(
    q: mx.array,
    k: mx.array,
    v: mx.array,
    *,
    scale: float,
    mask: mx.array,
    rows_at_once: int | None = None,
) -> mx.array:
    """softmax(q k^T * scale, masked) v for q [B, Hq, N, D], k / v [B, Hk, L, D] and a boolean
    mask [B or 1, 1, N, L]: [B, Hq, N, D]. `rows_at_once`: value rows a lane loads at once (one of
    VALUE_ROWS; default `value_rows(D)`): bit-equal results at 2, 4 and 8 on an H100."""
    B, Hq, N, D = q.shape
    heads = heads_per_block(Hq // k.shape[1], N)
    rows = value_rows(D) if rows_at_once is None else rows_at_once
    if rows not in VALUE_ROWS:
        raise ValueError(f"rows_at_once must be one of {VALUE_ROWS}, not {rows}")
    template = [("T", q.dtype), ("D", D), ("WARPS", WARPS), ("VROWS", rows)]
    if heads > 1:
        template.append(("HEADS", heads))
    (out,) = _kernel(heads > 1)(
        inputs=[q, k, v, mask, mx.array([scale], dtype=mx.float32)],
        template=template,
        grid=(B * (Hq // heads) * N * WARPS * 32, 1, 1),
        threadgroup=(WARPS * 32, 1, 1),
        output_shapes=[(B, Hq, N, D)],
        output_dtypes=[q.dtype],
    )
    return out


def takes(q: mx.array, k: mx.array, v: mx.array, mask: Any, sinks: Any = None) -> bool:
    """Whether the kernel computes this call as MLX would, and faster: a boolean mask over one
    head axis (a call without one keeps MLX's fused kernels), a few queries, grouped heads, a
    head size it handles, one floating dtype, and not more reading than it wins at
    (DEFAULT_MAX_BYTES or DEFAULT_MAX_GROUPED_BYTES, for several queries; `one_query_calls`,
    for one)."""
    if not isinstance(mask, mx.array) or mask.dtype != mx.bool_ or sinks is not None:
        return False
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4 or mask.ndim != 4:
        return False
    B, Hq, N, D = q.shape
    Bk, Hk, L, Dk = k.shape
    if not 1 <= N <= MAX_QUERIES or not 0 < L <= MAX_KEYS or D not in HEAD_DIMS:
        return False
    if N == 1 and not _one_query["on"]:
        return False
    if Bk != B or tuple(v.shape) != (B, Hk, L, D) or Dk != D or Hk == 0 or Hq % Hk:
        return False
    if N > 1:
        limit = DEFAULT_MAX_GROUPED_BYTES if heads_per_block(Hq // Hk, N) > 1 else DEFAULT_MAX_BYTES
        if key_bytes_read(q, k) > limit:
            return False
    if mask.shape[0] not in (1, B) or tuple(mask.shape[1:]) != (1, N, L):
        return False
    return q.dtype in FLOATS and k.dtype == q.dtype and v.dtype == q.dtype


def make_sdpa(original: SdpaFn) -> SdpaFn:
    """A drop-in `mx.fast.scaled_dot_product_attention` that runs the kernel for calls it
    `takes` on a CUDA GPU, else `original`."""

    def scaled_dot_product_attention(q, k, v, *args, scale, mask=None, sinks=None, **kwargs):
        if not args and not kwargs and on_cuda():
            if isinstance(mask, str):  # mlx-lm's caches pass "causal": cuDNN in MLX from 4 queries
                ours = causal_mask(q.shape[2], k.shape[2]) if mask == "causal" else None
                if ours is not None and takes(q, k, v, ours, sinks):
                    return verify_attention(q, k, v, scale=scale, mask=ours)
            elif takes(q, k, v, mask, sinks):
                return verify_attention(q, k, v, scale=scale, mask=mask)
        return original(q, k, v, *args, scale=scale, mask=mask, sinks=sinks, **kwargs)

    scaled_dot_product_attention.tandem_verify_attention = True  # type: ignore[attr-defined]
    scaled_dot_product_attention.__wrapped__ = original  # type: ignore[attr-defined]
    return scaled_dot_product_attention


def is_installed() -> bool:
    return bool(getattr(mx.fast.scaled_dot_product_attention, "tandem_verify_attention", False))


def install(*, force: bool = False) -> bool:
    """Route eligible attention calls through the kernel; True when it is in place (CUDA only)."""
    if not may_install(DISABLE_ENV, force=force):
        return False
    set_grouping(is_set(GROUPED_ENV), verify=not is_set(PER_HEAD_VERIFY_ENV))
    if not is_installed():
        mx.fast.scaled_dot_product_attention = make_sdpa(mx.fast.scaled_dot_product_attention)
    return True


def uninstall() -> None:
    """Put MLX's own function back (for A/B runs in one process)."""
    if is_installed():
        mx.fast.scaled_dot_product_attention = mx.fast.scaled_dot_product_attention.__wrapped__
