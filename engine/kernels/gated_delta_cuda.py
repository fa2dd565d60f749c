"""A CUDA kernel for mlx-lm's gated-delta recurrence (Qwen3-Next / Qwen3.5 linear attention).

mlx-lm fuses the recurrence only on Metal; on MLX's CUDA backend `gated_delta_update` falls back
to `gated_delta_ops`, a Python loop of T compiled steps per layer. `install()` swaps that module
global for a dispatcher that runs one fused kernel instead (same semantics as mlx-lm's
`_make_gated_delta_kernel`) and calls the original for anything the kernel does not cover.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mlx.core as mx

from engine.device import cuda_available
from engine.kernels.kernel_names import versioned_name
from engine.kernels.switch import may_install

DISABLE_ENV = "TANDEM_NO_GDN_KERNEL"
WARP = 32
THREADS_Y = 4  # value rows (warps) per block: 128 threads, as mlx-lm's Metal kernel
MAX_GRID_Z = 65535  # CUDA's limit on gridDim.z, which carries B * Hv
MAX_DK = 1024  # keeps the per-lane state (Dk / 32 floats) in registers

GatedDeltaFn = Callable[..., tuple[mx.array, mx.array]]


# The body MLX wraps in `__global__ void custom_kernel_<name>(const T* q, const Shape q_shape, ...,
# InT* y, StT* state_out)` inside namespace mlx::core::cu; the template arguments InT, StT, Dk,
# Dv, Hk, Hv become `using` / `constexpr int` lines in front of it. T is read from q's shape (the
# source names q's shape, so MLX passes it) so that one compiled kernel serves every T.
# Launch: grid (32, Dv, B * Hv) threads, block (32, 4, 1): one warp per (b, hv, dv) value row.
_SOURCE = """
  constexpr int n_per_t = Dk / 32;
  const int n_steps = q_shape[1];
  const int n = blockIdx.z;
  const int b_idx = n / Hv;
  const int hv_idx = n % Hv;
  const int hk_idx = hv_idx / (Hv / Hk);
  const int lane = threadIdx.x;
  const int dv_idx = blockIdx.y * blockDim.y + threadIdx.y;
  if (dv_idx >= Dv) {
    return;  // a whole warp leaves, so the full-mask shuffles below stay valid
  }

  const int64_t bt = static_cast<int64_t>(b_idx) * n_steps;
  auto q_ = q + (bt * Hk + hk_idx) * Dk;
  auto k_ = k + (bt * Hk + hk_idx) * Dk;
  auto v_ = v + (bt * Hv + hv_idx) * Dv;
  auto y_ = y + (bt * Hv + hv_idx) * Dv;
  auto beta_ = beta + bt * Hv;
  __G_SETUP__
  __MASK_SETUP__

  const int64_t row = (static_cast<int64_t>(n) * Dv + dv_idx) * Dk;
  auto i_state = state_in + row;
  auto o_state = state_out + row;

  float st[n_per_t];
  for (int i = 0; i < n_per_t; ++i) {
    st[i] = static_cast<float>(i_state[i * 32 + lane]);
  }

  for (int t = 0; t < n_steps; ++t) {
    if (__MASK_TEST__) {
      float kv_mem = 0.0f;
      for (int i = 0; i < n_per_t; ++i) {
        const int s_idx = i * 32 + lane;
        st[i] = st[i] * static_cast<float>(__G_AT__);
        kv_mem += st[i] * static_cast<float>(k_[s_idx]);
      }
      for (int offset = 16; offset > 0; offset /= 2) {
        kv_mem += __shfl_xor_sync(0xffffffff, kv_mem, offset);
      }
      const float delta =
          (static_cast<float>(v_[dv_idx]) - kv_mem) * static_cast<float>(beta_[hv_idx]);
      float out = 0.0f;
      for (int i = 0; i < n_per_t; ++i) {
        const int s_idx = i * 32 + lane;
        st[i] = st[i] + static_cast<float>(k_[s_idx]) * delta;
        out += st[i] * static_cast<float>(q_[s_idx]);
      }
      for (int offset = 16; offset > 0; offset /= 2) {
        out += __shfl_xor_sync(0xffffffff, out, offset);
      }
      if (lane == 0) {
        y_[dv_idx] = static_cast<InT>(out);
      }
    } else if (lane == 0) {
      y_[dv_idx] = static_cast<InT>(0.0f);
    }
    q_ += Hk * Dk;
    k_ += Hk * Dk;
    v_ += Hv * Dv;
    y_ += Hv * Dv;
    beta_ += Hv;
    __G_ADVANCE__
  }

  for (int i = 0; i < n_per_t; ++i) {
    o_state[i * 32 + lane] = static_cast<StT>(st[i]);
  }
"""

_G_SCALAR = {  # g: [B, T, Hv]
    "__G_SETUP__": "auto g_ = g + bt * Hv;",
    "__G_AT__": "g_[hv_idx]",
    "__G_ADVANCE__": "g_ += Hv;",
}
_G_VECTOR = {  # g: [B, T, Hv, Dk]
    "__G_SETUP__": "auto g_ = g + (bt * Hv + hv_idx) * Dk;",
    "__G_AT__": "g_[s_idx]",
    "__G_ADVANCE__": "g_ += Hv * Dk;",
}


def kernel_source(*, has_mask: bool, vectorized: bool) -> str:
    """The CUDA body for one variant (masked or not, scalar or per-key gate)."""
    parts = dict(_G_VECTOR if vectorized else _G_SCALAR)
    parts["__MASK_SETUP__"] = "auto mask_ = mask + bt;" if has_mask else ""
    parts["__MASK_TEST__"] = "mask_[t]" if has_mask else "true"
    source = _SOURCE
    for key, value in parts.items():
        source = source.replace(key, value)
    return source


def kernel_input_names(*, has_mask: bool) -> list[str]:
    """The kernel's inputs in call order (MLX generates the signature from these names)."""
    return ["q", "k", "v", "g", "beta", "state_in"] + (["mask"] if has_mask else [])


def _variant_name(*, has_mask: bool, vectorized: bool) -> str:
    base = "tandem_gated_delta" + ("_vec" if vectorized else "") + ("_mask" if has_mask else "")
    return versioned_name(base, kernel_source(has_mask=has_mask, vectorized=vectorized))


def kernel_names() -> list[str]:
    """Every name this module's kernels are compiled under (engine/kernels/stale_kernels.py)."""
    return [
        _variant_name(has_mask=mask, vectorized=vector)
        for mask in (False, True)
        for vector in (False, True)
    ]


_kernels: dict[tuple[bool, bool], Any] = {}


def _kernel(*, has_mask: bool, vectorized: bool) -> Any:
    key = (has_mask, vectorized)
    if key not in _kernels:
        source = kernel_source(has_mask=has_mask, vectorized=vectorized)
        _kernels[key] = mx.fast.cuda_kernel(
            name=_variant_name(has_mask=has_mask, vectorized=vectorized),
            input_names=kernel_input_names(has_mask=has_mask),
            output_names=["y", "state_out"],
            source=source,
        )
    return _kernels[key]


def gated_delta_cuda(
    q: mx.array,
    k: mx.array,
    v: mx.array,
    g: mx.array,
    beta: mx.array,
    state: mx.array,
    mask: mx.array | None = None,
) -> tuple[mx.array, mx.array]:
    """Run the fused recurrence on the GPU: returns y [B, T, Hv, Dv] and the new state."""
    B, T, Hk, Dk = k.shape
    Hv, Dv = v.shape[2:]
    vectorized = g.ndim == 4
    inputs = [q, k, v, g, beta, state]
    if mask is not None:
        inputs.append(mask if mask.dtype == mx.bool_ else mask.astype(mx.bool_))
    kernel = _kernel(has_mask=mask is not None, vectorized=vectorized)
    y, new_state = kernel(
        inputs=inputs,
        template=[
            ("InT", q.dtype),
            ("StT", state.dtype),
            ("Dk", Dk),
            ("Dv", Dv),
            ("Hk", Hk),
            ("Hv", Hv),
        ],
        grid=(WARP, Dv, B * Hv),
        threadgroup=(WARP, THREADS_Y, 1),
        output_shapes=[(B, T, Hv, Dv), state.shape],
        output_dtypes=[q.dtype, state.dtype],
    )
    return y, new_state


def eligible(
    q: mx.array,
    k: mx.array,
    v: mx.array,
    g: mx.array,
    beta: mx.array,
    state: mx.array | None,
    mask: mx.array | None = None,
) -> bool:
    """Whether the kernel covers these inputs exactly as `gated_delta_ops` would compute them."""
    if mx.default_device() != mx.gpu or not cuda_available():
        return False
    if q.ndim != 4 or k.shape != q.shape or v.ndim != 4 or state is None:
        return False
    B, T, Hk, Dk = q.shape
    Hv, Dv = v.shape[2:]
    if B < 1 or T < 1 or v.shape[:2] != (B, T) or Hk < 1 or Hv % Hk != 0:
        return False
    if Dk < WARP or Dk % WARP != 0 or Dk > MAX_DK or B * Hv > MAX_GRID_Z:
        return False
    if g.shape not in ((B, T, Hv), (B, T, Hv, Dk)) or beta.shape != (B, T, Hv):
        return False
    # The ops path promotes the state to float32 (g is float32); the kernel keeps state's dtype.
    if state.dtype != mx.float32 or state.shape != (B, Hv, Dv, Dk):
        return False
    floats = (mx.float32, mx.float16, mx.bfloat16)
    if any(a.dtype not in floats for a in (q, k, v, g, beta)):
        return False
    return mask is None or mask.shape == (B, T)


def make_dispatcher(
    original: GatedDeltaFn, *, use_kernel: Callable[..., bool] = eligible
) -> GatedDeltaFn:
    """A drop-in `gated_delta_ops` that runs the kernel when `use_kernel` allows, else `original`."""

    def gated_delta_ops(
        q: mx.array,
        k: mx.array,
        v: mx.array,
        g: mx.array,
        beta: mx.array,
        state: mx.array | None = None,
        mask: mx.array | None = None,
    ) -> tuple[mx.array, mx.array]:
        if state is None:  # as the original does
            B, _, _, Dk = q.shape
            Hv, Dv = v.shape[-2:]
            state = mx.zeros((B, Hv, Dv, Dk), dtype=mx.float32)
        if use_kernel(q, k, v, g, beta, state, mask):
            return gated_delta_cuda(q, k, v, g, beta, state, mask)
        return original(q, k, v, g, beta, state, mask)

    gated_delta_ops.tandem_original = original  # type: ignore[attr-defined]
    return gated_delta_ops


def _module() -> Any:
    from mlx_lm.models import gated_delta

    return gated_delta


def is_installed() -> bool:
    """Whether mlx-lm's `gated_delta_ops` is currently our dispatcher."""
    return hasattr(_module().gated_delta_ops, "tandem_original")


def install(*, force: bool = False) -> bool:
    """Route mlx-lm's gated-delta fallback through the CUDA kernel; True when it is in place."""
    if not may_install(DISABLE_ENV, force=force):
        return False
    module = _module()
    if not is_installed():
        # gated_delta_update looks this global up at each call, so every model sees the swap.
        module.gated_delta_ops = make_dispatcher(module.gated_delta_ops)
    return True


def uninstall() -> None:
    """Put mlx-lm's own `gated_delta_ops` back (for A/B runs in one process)."""
    module = _module()
    if is_installed():
        module.gated_delta_ops = module.gated_delta_ops.tandem_original
