"""A CUDA kernel for the matmuls of a few rows: `x @ w.T` for 2 to 16 rows of x.

A decode step of a few chats and a verify forward of one or two rows multiply a handful of
token rows by every weight of the model. MLX's CUDA backend runs one row through its own
matrix-vector kernel (near the memory's speed) and everything wider through cuBLASLt, whose
kernels for a few rows are the likely reason that on the H200 a random 8B stepped one row in
5.0 ms and four rows in 8.0 ms (docs/benchmarks.md), though both read the same 14 GB.
Here each warp reads COLS rows of `w` once, 16 bytes a lane at a time, and multiplies each
against all of x's rows (at most 16, kept as float32 sums), as MLX's matrix-vector kernel does
for one. Past about 16 rows the multiply-adds on CUDA cores should cost more than the reading
and cuBLAS's tensor cores win (matmul_check times up to 32 rows to find the line). `install()` routes eligible `nn.Linear` calls (and tied embeddings used as the
output layer) to it on CUDA and leaves every other call to MLX. Metal's MLX has matrix-vector
kernels of its own for these shapes; this module changes nothing there.

It is off unless `TANDEM_SKINNY_MATMUL=1`. On an H100 it won alone at 2-4 rows, but inside the
random 8B's 5-token forward it was 4 ms slower than cuBLASLt even with its Python call compiled
away (docs/benchmarks.md, twenty-first pass): it loses on the GPU, not the host. Turned on, it
first checks itself against MLX on a few small cases and stays off where they differ.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from engine.device import on_cuda
from engine.kernels.kernel_names import versioned_name
from engine.kernels.switch import is_set, may_install

log = logging.getLogger(__name__)

ENABLE_ENV = "TANDEM_SKINNY_MATMUL"  # opt-in until checked on a CUDA GPU (above)
DISABLE_ENV = "TANDEM_NO_SKINNY_MATMUL"
MIN_ROWS = 2  # one row is MLX's own matrix-vector kernel
MAX_ROWS = 16
DEFAULT_COLS = 2  # rows of w per warp
DEFAULT_WARPS = 4
FLOATS = (mx.float16, mx.bfloat16, mx.float32)
DEFAULT_CHECK_TOLERANCE = 2e-2  # of the result's scale: bfloat16 output rounding passes

# MLX wraps this in `__global__ void custom_kernel_<name>(const T* x, const Shape x_shape, ...,
# const T* w, ..., T* out)`; T, ROWS (a power of two >= x's rows), COLS and WARPS become
# `using` / `constexpr int`. x [M, K], w [N, K], out [M, N], K a whole number of 16-byte vectors.
# Launch: one block of WARPS warps per WARPS * COLS output columns.
_SOURCE = """
  constexpr int VEC = 16 / sizeof(T);
  const int M = x_shape[0];
  const int K = x_shape[1];
  const int N = w_shape[0];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int n0 = (blockIdx.x * WARPS + warp) * COLS;
  if (n0 >= N) {
    return;
  }
  const int vectors = K / VEC;
  const uint4* xv = reinterpret_cast<const uint4*>(x);
  const uint4* wv[COLS];
  #pragma unroll
  for (int c = 0; c < COLS; ++c) {
    const int n = min(n0 + c, N - 1);  // a missing column reads its neighbour, never written
    wv[c] = reinterpret_cast<const uint4*>(w + static_cast<int64_t>(n) * K);
  }
  float acc[ROWS][COLS];
  #pragma unroll
  for (int m = 0; m < ROWS; ++m) {
    #pragma unroll
    for (int c = 0; c < COLS; ++c) {
      acc[m][c] = 0.0f;
    }
  }
  #pragma unroll 4  // several iterations' loads in flight: the reads are the cost
  for (int i = lane; i < vectors; i += 32) {
    float wf[COLS][VEC];
    #pragma unroll
    for (int c = 0; c < COLS; ++c) {
      uint4 raw = wv[c][i];
      const T* vals = reinterpret_cast<const T*>(&raw);
      #pragma unroll
      for (int e = 0; e < VEC; ++e) {
        wf[c][e] = static_cast<float>(vals[e]);
      }
    }
    #pragma unroll
    for (int m = 0; m < ROWS; ++m) {
      if (m < M) {
        uint4 raw = xv[static_cast<int64_t>(m) * vectors + i];
        const T* vals = reinterpret_cast<const T*>(&raw);
        #pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float xe = static_cast<float>(vals[e]);
          #pragma unroll
          for (int c = 0; c < COLS; ++c) {
            acc[m][c] = fmaf(xe, wf[c][e], acc[m][c]);
          }
        }
      }
    }
  }
  #pragma unroll
  for (int m = 0; m < ROWS; ++m) {
    #pragma unroll
    for (int c = 0; c < COLS; ++c) {
      float v = acc[m][c];
      #pragma unroll
      for (int off = 16; off > 0; off /= 2) {
        v += __shfl_xor_sync(0xffffffff, v, off);
      }
      acc[m][c] = v;
    }
  }
  #pragma unroll
  for (int m = 0; m < ROWS; ++m) {
    #pragma unroll
    for (int c = 0; c < COLS; ++c) {
      const int n = n0 + c;
      if (m < M && n < N && (m * COLS + c) % 32 == lane) {
        out[static_cast<int64_t>(m) * N + n] = static_cast<T>(acc[m][c]);
      }
    }
  }
"""

LinearCall = Callable[[Any, mx.array], mx.array]
_kernel: Any = None
KERNEL_NAME = versioned_name("tandem_skinny_matmul", _SOURCE)  # what MLX compiles it under


def kernel_names() -> list[str]:
    """Every name this module's kernel is compiled under (engine/kernels/stale_kernels.py)."""
    return [KERNEL_NAME]


def kernel_source() -> str:
    return _SOURCE


def _rows_bucket(m: int) -> int:
    bucket = MIN_ROWS
    while bucket < m:
        bucket *= 2
    return bucket


def skinny_matmul(
    x: mx.array, w: mx.array, *, cols: int = DEFAULT_COLS, warps: int = DEFAULT_WARPS
) -> mx.array:
    """x [M, K] @ w[N, K].T: [M, N], in x's dtype, sums in float32."""
    global _kernel
    if _kernel is None:
        _kernel = mx.fast.cuda_kernel(
            name=KERNEL_NAME,
            input_names=["x", "w"],
            output_names=["out"],
            source=_SOURCE,
        )
    M = x.shape[0]
    N = w.shape[0]
    per_block = warps * cols
    blocks = (N + per_block - 1) // per_block
    (out,) = _kernel(
        inputs=[x, w],
        template=[("T", x.dtype), ("ROWS", _rows_bucket(M)), ("COLS", cols), ("WARPS", warps)],
        grid=(blocks * warps * 32, 1, 1),
        threadgroup=(warps * 32, 1, 1),
        output_shapes=[(M, N)],
        output_dtypes=[x.dtype],
    )
    return out


def takes(x: mx.array, w: mx.array) -> bool:
    """Whether the kernel computes `x @ w.T` as MLX would, and faster: 2 to 16 rows in all, a
    plain 2-D weight of x's floating dtype, and a width of whole 16-byte vectors. Called for
    every linear layer: the row count, which rejects most calls, comes first."""
    shape = x.shape
    rows = 1
    for size in shape[:-1]:
        rows *= size
    if not MIN_ROWS <= rows <= MAX_ROWS:  # a 0-d x counts one row
        return False
    w_shape = w.shape
    if len(w_shape) != 2 or w_shape[1] != shape[-1] or w_shape[0] == 0:
        return False
    dtype = x.dtype
    return dtype in FLOATS and w.dtype == dtype and shape[-1] % (16 // dtype.size) == 0


def _apply(x: mx.array, w: mx.array) -> mx.array:
    K = w.shape[1]
    out = skinny_matmul(x.reshape(-1, K), w)
    return out.reshape(*x.shape[:-1], w.shape[0])


def make_routed(original: LinearCall) -> LinearCall:
    """A drop-in `nn.Linear.__call__` or `nn.Embedding.as_linear` (tied output layers) that runs
    the kernel for calls it `takes` on a CUDA GPU, and `original` for every other."""

    def routed(self, x):
        weight = self["weight"]
        if not takes(x, weight) or not on_cuda():
            return original(self, x)
        out = _apply(x, weight)
        return out + self["bias"] if "bias" in self else out  # an Embedding has none

    routed.tandem_skinny_matmul = True  # type: ignore[attr-defined]
    routed.__wrapped__ = original  # type: ignore[attr-defined]
    return routed


def is_installed() -> bool:
    return bool(getattr(nn.Linear.__call__, "tandem_skinny_matmul", False))


def self_check() -> str | None:
    """None when the kernel gives what MLX gives on a small case of every row bucket, else why
    not (a GPU, driver or MLX where it compiles or computes otherwise keeps MLX's matmuls)."""
    try:
        for rows in (2, 5, 16):
            x = mx.random.normal((rows, 512), key=mx.random.key(rows)).astype(mx.bfloat16)
            w = mx.random.normal((72, 512), key=mx.random.key(99)).astype(mx.bfloat16)
            want = x.astype(mx.float32) @ w.astype(mx.float32).T
            got = skinny_matmul(x, w).astype(mx.float32)
            error = mx.abs(got - want).max().item()
            scale = mx.abs(want).max().item()
            if not error <= DEFAULT_CHECK_TOLERANCE * scale:
                return f"{rows} rows: off by {error:.3g} of {scale:.3g}"
    except Exception as exc:  # noqa: BLE001 - any failure keeps MLX's path
        return f"{type(exc).__name__}: {exc}"
    return None


def install(*, force: bool = False) -> bool:
    """Route eligible matmuls through the kernel; True when it is in place (CUDA only, and only
    when ENABLE_ENV turns it on and `self_check` passes, unless `force`)."""
    if not force and not is_set(ENABLE_ENV):
        return False
    if not may_install(DISABLE_ENV, force=force):
        return False
    if not is_installed() and not force:
        problem = self_check()
        if problem is not None:
            log.warning("the skinny-matmul kernel is off: it differs from MLX (%s)", problem)
            return False
    if not is_installed():
        nn.Linear.__call__ = make_routed(nn.Linear.__call__)
        nn.Embedding.as_linear = make_routed(nn.Embedding.as_linear)
    return True


def uninstall() -> None:
    """Put MLX's own methods back (for A/B runs in one process)."""
    if is_installed():
        nn.Linear.__call__ = nn.Linear.__call__.__wrapped__
        nn.Embedding.as_linear = nn.Embedding.as_linear.__wrapped__
