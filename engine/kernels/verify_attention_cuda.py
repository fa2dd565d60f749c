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
keys, and keep an online softmax in float32, as MLX's vector kernel does. `install()` routes
eligible `mx.fast.scaled_dot_product_attention` calls to it on CUDA and leaves every other call
to MLX.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import mlx.core as mx

from engine.device import on_cuda
from engine.kernels.switch import may_install

DISABLE_ENV = "TANDEM_NO_VERIFY_ATTENTION"
MAX_QUERIES = 32  # the widest verify forward auto asks for is 17
MAX_KEYS = 8192  # past this the key loop of one block is longer than cuDNN's whole call
# Each block reads its head's keys and values alone, so with several queries the kernel's time
# grows with the bytes B * Hq * N * L * D * itemsize; on the H200 it beat cuDNN everywhere below
# 128M and lost from about 150M. With one query (a ragged batch's decode step) only the heads of
# a group read the same keys, and MLX's unfused path is dearer: the kernel was 2.3-4.1x faster
# in every case measured, up to B 32 x L 4096 (537M), so those are not limited
# (python -m engine.bench.attention_check; docs/benchmarks.md).
DEFAULT_MAX_BYTES = 128_000_000
# ...but a one-query call through `mx.fast.cuda_kernel` costs the host more than MLX's own ops:
# at the engine's plain step MLX won on an H100 in six pairs of six where the kernel won on the
# H200; the engine can time both per batch size (engine/core/decode_attention_choice.py)
HEAD_DIMS = (64, 96, 128, 256)  # a whole number of floats per lane
WARPS = 8
FLOATS = (mx.float32, mx.float16, mx.bfloat16)

# MLX wraps this in `__global__ void custom_kernel_<name>(const T* q, const Shape q_shape, ...,
# const bool* mask, const Shape mask_shape, const float* scale, T* out)`; T, D and WARPS become
# `using` / `constexpr int`. q / out [B, Hq, N, D], k / v [B, Hk, L, D], mask [Bm, 1, N, L] with
# Bm 1 or B. Launch: one block of WARPS warps per (b, hq, n).
_SOURCE = """
  constexpr int PER_LANE = D / 32;
  constexpr int VEC = 16 / sizeof(T);
  const float NEG_INF = -__int_as_float(0x7f800000);
  const int Hq = q_shape[1];
  const int N = q_shape[2];
  const int Hk = k_shape[1];
  const int L = k_shape[2];
  const int block = blockIdx.x;
  const int n = block % N;
  const int hq = (block / N) % Hq;
  const int b = block / (N * Hq);
  const int hk = hq / (Hq / Hk);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;

  __shared__ float qs[D];
  __shared__ float warp_m[WARPS];
  __shared__ float warp_l[WARPS];
  __shared__ float warp_acc[WARPS][D];

  const T* qp = q + ((static_cast<int64_t>(b) * Hq + hq) * N + n) * D;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    qs[d] = static_cast<float>(qp[d]) * scale[0];
  }
  __syncthreads();

  const int64_t kv = (static_cast<int64_t>(b) * Hk + hk) * L;
  const T* kp = k + kv * D;
  const T* vp = v + kv * D;
  const int mb = mask_shape[0] == 1 ? 0 : b;
  const bool* mp = mask + (static_cast<int64_t>(mb) * N + n) * L;

  float m = NEG_INF;
  float l = 0.0f;
  float acc[PER_LANE];
  #pragma unroll
  for (int i = 0; i < PER_LANE; ++i) {
    acc[i] = 0.0f;
  }
  for (int base = warp * 32; base < L; base += WARPS * 32) {
    const int j = base + lane;
    float s = NEG_INF;
    if (j < L && mp[j]) {
      const uint4* kj = reinterpret_cast<const uint4*>(kp + static_cast<int64_t>(j) * D);
      float dot = 0.0f;
      #pragma unroll
      for (int c = 0; c < D / VEC; ++c) {
        uint4 raw = kj[c];
        const T* vals = reinterpret_cast<const T*>(&raw);
        #pragma unroll
        for (int e = 0; e < VEC; ++e) {
          dot = fmaf(qs[c * VEC + e], static_cast<float>(vals[e]), dot);
        }
      }
      s = dot;
    }
    float top = s;
    #pragma unroll
    for (int off = 16; off > 0; off /= 2) {
      top = fmaxf(top, __shfl_xor_sync(0xffffffff, top, off));
    }
    if (top == NEG_INF) {
      continue;  // every key of these 32 is masked (padding, holes, the unwritten tail)
    }
    const float m_new = fmaxf(m, top);
    const float keep = expf(m - m_new);
    const float p = s == NEG_INF ? 0.0f : expf(s - m_new);
    float sum = p;
    #pragma unroll
    for (int off = 16; off > 0; off /= 2) {
      sum += __shfl_xor_sync(0xffffffff, sum, off);
    }
    l = l * keep + sum;
    #pragma unroll
    for (int i = 0; i < PER_LANE; ++i) {
      acc[i] *= keep;
    }
    for (int t = 0; t < 32; ++t) {
      const float pt = __shfl_sync(0xffffffff, p, t);
      if (pt != 0.0f) {
        const T* vj = vp + static_cast<int64_t>(base + t) * D + lane * PER_LANE;
        #pragma unroll
        for (int i = 0; i < PER_LANE; ++i) {
          acc[i] = fmaf(pt, static_cast<float>(vj[i]), acc[i]);
        }
      }
    }
    m = m_new;
  }

  if (lane == 0) {
    warp_m[warp] = m;
    warp_l[warp] = l;
  }
  #pragma unroll
  for (int i = 0; i < PER_LANE; ++i) {
    warp_acc[warp][lane * PER_LANE + i] = acc[i];
  }
  __syncthreads();

  float top = NEG_INF;
  #pragma unroll
  for (int w = 0; w < WARPS; ++w) {
    top = fmaxf(top, warp_m[w]);
  }
  float total = 0.0f;
  #pragma unroll
  for (int w = 0; w < WARPS; ++w) {
    total += warp_m[w] == NEG_INF ? 0.0f : warp_l[w] * expf(warp_m[w] - top);
  }
  T* op = out + ((static_cast<int64_t>(b) * Hq + hq) * N + n) * D;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float o = 0.0f;
    #pragma unroll
    for (int w = 0; w < WARPS; ++w) {
      if (warp_m[w] != NEG_INF) {
        o = fmaf(warp_acc[w][d], expf(warp_m[w] - top), o);
      }
    }
    op[d] = static_cast<T>(o / total);
  }
"""

SdpaFn = Callable[..., mx.array]
_kernel: Any = None
_one_query = {"on": True}  # whether one-query calls may take the kernel (`one_query_calls`)


@contextmanager
def one_query_calls(on: bool) -> Iterator[None]:
    """Within this block, one-query calls take the kernel (`on`) or stay with MLX."""
    before, _one_query["on"] = _one_query["on"], on
    try:
        yield
    finally:
        _one_query["on"] = before


def kernel_source() -> str:
    return _SOURCE


def verify_attention(
    q: mx.array, k: mx.array, v: mx.array, *, scale: float, mask: mx.array
) -> mx.array:
    """softmax(q k^T * scale, masked) v for q [B, Hq, N, D], k / v [B, Hk, L, D] and a boolean
    mask [B or 1, 1, N, L]: [B, Hq, N, D]."""
    global _kernel
    if _kernel is None:
        _kernel = mx.fast.cuda_kernel(
            name="tandem_verify_attention",
            input_names=["q", "k", "v", "mask", "scale"],
            output_names=["out"],
            source=_SOURCE,
        )
    B, Hq, N, D = q.shape
    (out,) = _kernel(
        inputs=[q, k, v, mask, mx.array([scale], dtype=mx.float32)],
        template=[("T", q.dtype), ("D", D), ("WARPS", WARPS)],
        grid=(B * Hq * N * WARPS * 32, 1, 1),
        threadgroup=(WARPS * 32, 1, 1),
        output_shapes=[(B, Hq, N, D)],
        output_dtypes=[q.dtype],
    )
    return out


def takes(q: mx.array, k: mx.array, v: mx.array, mask: Any, sinks: Any = None) -> bool:
    """Whether the kernel computes this call as MLX would, and faster: a boolean mask over one
    head axis (a call without one keeps MLX's fused kernels), a few queries, grouped heads, a
    head size it handles, one floating dtype, and not more reading than it wins at
    (DEFAULT_MAX_BYTES, for several queries; `one_query_calls`, for one)."""
    if not isinstance(mask, mx.array) or mask.dtype != mx.bool_ or sinks is not None:
        return False
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4 or mask.ndim != 4:
        return False
    B, Hq, N, D = q.shape
    Bk, Hk, L, Dk = k.shape
    if not 1 <= N <= MAX_QUERIES or not 0 < L <= MAX_KEYS or D not in HEAD_DIMS:
        return False
    if N > 1 and B * Hq * N * L * D * q.dtype.size > DEFAULT_MAX_BYTES:
        return False
    if N == 1 and not _one_query["on"]:
        return False
    if Bk != B or tuple(v.shape) != (B, Hk, L, D) or Dk != D or Hk == 0 or Hq % Hk:
        return False
    if mask.shape[0] not in (1, B) or tuple(mask.shape[1:]) != (1, N, L):
        return False
    return q.dtype in FLOATS and k.dtype == q.dtype and v.dtype == q.dtype


def make_sdpa(original: SdpaFn) -> SdpaFn:
    """A drop-in `mx.fast.scaled_dot_product_attention` that runs the kernel for calls it
    `takes` on a CUDA GPU, else `original`."""

    def scaled_dot_product_attention(q, k, v, *args, scale, mask=None, sinks=None, **kwargs):
        if args or kwargs or not on_cuda() or not takes(q, k, v, mask, sinks):
            return original(q, k, v, *args, scale=scale, mask=mask, sinks=sinks, **kwargs)
        return verify_attention(q, k, v, scale=scale, mask=mask)

    scaled_dot_product_attention.tandem_verify_attention = True  # type: ignore[attr-defined]
    scaled_dot_product_attention.__wrapped__ = original  # type: ignore[attr-defined]
    return scaled_dot_product_attention


def is_installed() -> bool:
    return bool(getattr(mx.fast.scaled_dot_product_attention, "tandem_verify_attention", False))


def install(*, force: bool = False) -> bool:
    """Route eligible attention calls through the kernel; True when it is in place (CUDA only)."""
    if not may_install(DISABLE_ENV, force=force):
        return False
    if not is_installed():
        mx.fast.scaled_dot_product_attention = make_sdpa(mx.fast.scaled_dot_product_attention)
    return True


def uninstall() -> None:
    """Put MLX's own function back (for A/B runs in one process)."""
    if is_installed():
        mx.fast.scaled_dot_product_attention = mx.fast.scaled_dot_product_attention.__wrapped__
