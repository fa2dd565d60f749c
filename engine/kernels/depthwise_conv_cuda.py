"""A CUDA kernel for the depthwise causal convolution of hybrid and state-space models.

Qwen3.5 / Qwen3-Next, Mamba, LFM2 and the other recurrent models run a short depthwise `nn.Conv1d`
(groups = channels, 4 taps, no padding: the layer prepends its conv state) in every recurrent
layer. On MLX's CUDA backend `mx.conv1d` goes through cuDNN, which builds an operation graph and
searches an execution plan on the host at every call, and much more for each new shape: measured
on the H200, a hybrid model's forward at a batch size it has not seen cost about 200 ms against
25 ms for a pure-attention model of the same size, and each verify round paid the host cost of
one cuDNN launch per layer. This is four multiply-adds per output. `install()` routes eligible
calls to one small kernel (float32 accumulation, as cuDNN computes half-precision convolutions)
and leaves every other convolution to MLX.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from engine.device import cuda_available
from engine.kernels.kernel_names import versioned_name
from engine.kernels.switch import may_install

DISABLE_ENV = "TANDEM_NO_CONV_KERNEL"
THREADS = 256
MAX_TAPS = 64  # longer filters are not the layers this is for; MLX keeps them
FLOATS = (mx.float32, mx.float16, mx.bfloat16)

# MLX wraps this in `__global__ void custom_kernel_<name>(const T* x, const Shape x_shape,
# const T* w, OutT* y)`; the template arguments InT, OutT, K become `using` / `constexpr int`.
# One thread per output (b, t, c); w is the weight [C, K, 1] read as [C, K].
_SOURCE = """
  const int L = x_shape[1];
  const int C = x_shape[2];
  const int T = L - K + 1;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<int64_t>(x_shape[0]) * T * C) {
    return;
  }
  const int c = idx % C;
  const int64_t bt = idx / C;
  const int64_t t = bt % T;
  const int64_t b = bt / T;
  const InT* xp = x + (b * L + t) * C + c;
  const InT* wp = w + static_cast<int64_t>(c) * K;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) {
    acc = fmaf(static_cast<float>(xp[static_cast<int64_t>(k) * C]), static_cast<float>(wp[k]), acc);
  }
  y[idx] = static_cast<OutT>(acc);
"""

ConvCall = Callable[[nn.Conv1d, mx.array], mx.array]
_kernel: Any = None
KERNEL_NAME = versioned_name("tandem_depthwise_conv1d", _SOURCE)  # what MLX compiles it under


def kernel_names() -> list[str]:
    """Every name this module's kernel is compiled under (engine/kernels/stale_kernels.py)."""
    return [KERNEL_NAME]


def kernel_source() -> str:
    return _SOURCE


def depthwise_conv_cuda(x: mx.array, weight: mx.array) -> mx.array:
    """y[b, t, c] = sum_k x[b, t + k, c] * weight[c, k, 0] (no padding): [B, L - K + 1, C]."""
    global _kernel
    if _kernel is None:
        _kernel = mx.fast.cuda_kernel(
            name=KERNEL_NAME,
            input_names=["x", "w"],
            output_names=["y"],
            source=_SOURCE,
        )
    B, L, C = x.shape
    K = weight.shape[1]
    T = L - K + 1
    (y,) = _kernel(
        inputs=[x, weight],
        template=[("InT", x.dtype), ("OutT", x.dtype), ("K", K)],
        grid=(max(B * T * C, 1), 1, 1),
        threadgroup=(THREADS, 1, 1),
        output_shapes=[(B, T, C)],
        output_dtypes=[x.dtype],
    )
    return y


def eligible(conv: nn.Conv1d, x: mx.array) -> bool:
    """Whether the kernel runs this call: on the GPU of a CUDA machine, a call it `takes`."""
    return mx.default_device() == mx.gpu and cuda_available() and takes(conv, x)


def takes(conv: nn.Conv1d, x: mx.array) -> bool:
    """Whether the kernel computes this call as `mx.conv1d` would: a depthwise filter of a
    few taps, stride and dilation 1, no padding, one floating dtype."""
    weight = conv.weight
    if x.ndim != 3 or weight.ndim != 3 or weight.shape[2] != 1:
        return False
    channels, taps = weight.shape[0], weight.shape[1]
    if conv.groups != channels or x.shape[2] != channels or not 1 <= taps <= MAX_TAPS:
        return False
    if (conv.stride, conv.padding, conv.dilation) != (1, 0, 1) or x.shape[1] < taps:
        return False
    return x.dtype in FLOATS and weight.dtype == x.dtype and x.size > 0


def make_call(original: ConvCall, *, use_kernel: Callable[..., bool] = eligible) -> ConvCall:
    """A drop-in `nn.Conv1d.__call__` that runs the kernel when `use_kernel` allows, else
    `original`; the bias is added afterwards, as `nn.Conv1d` does."""

    def __call__(self: nn.Conv1d, x: mx.array) -> mx.array:
        if not use_kernel(self, x):
            return original(self, x)
        y = depthwise_conv_cuda(x, self.weight)
        if "bias" in self:
            y = y + self.bias
        return y

    __call__.tandem_conv_kernel = True  # type: ignore[attr-defined]
    __call__.__wrapped__ = original  # type: ignore[attr-defined]
    return __call__


def is_installed() -> bool:
    """Whether `nn.Conv1d.__call__` runs through the kernel (under any later hook that keeps
    `__wrapped__`, such as the recurrent-state capture's)."""
    fn: Any = nn.Conv1d.__call__
    while fn is not None:
        if getattr(fn, "tandem_conv_kernel", False):
            return True
        fn = getattr(fn, "__wrapped__", None)
    return False


def install(*, force: bool = False) -> bool:
    """Route eligible depthwise convolutions through the kernel; True when it is in place. It
    must run before the recurrent-state capture hooks `nn.Conv1d` (model loading does)."""
    if not may_install(DISABLE_ENV, force=force):
        return False
    if is_installed():
        return True
    if getattr(nn.Conv1d.__call__, "tandem_capture", False):
        return False  # hooked already without it: never wrap the capture (it would miss inputs)
    nn.Conv1d.__call__ = make_call(nn.Conv1d.__call__)
    return True


def uninstall() -> None:
    """Put MLX's own `nn.Conv1d.__call__` back (for A/B runs in one process), when it is on top."""
    if getattr(nn.Conv1d.__call__, "tandem_conv_kernel", False):
        nn.Conv1d.__call__ = nn.Conv1d.__call__.__wrapped__
