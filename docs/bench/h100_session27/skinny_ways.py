"""Session 27: ways to run a model's linears, switched in place (probe and A/B).

mlx: MLX's matmuls as the engine runs them. skinny: the skinny-matmul kernel for every linear
and fused product of 2-16 rows, called directly. skinny_c: the same, each call through a
compiled function. mlp_c: each layer's MLP compiled (for calls of <= 16 rows). mlp_c_skinny /
mlp_c_skinny_c: the MLP compiled with the kernel inside, and the attention projections' kernel
called directly / compiled."""

import mlx.core as mx
import mlx.nn as nn

from engine import fused_projections as fp
from engine.kernels import skinny_matmul_cuda as smc

WAYS = ("mlx", "skinny", "skinny_c", "mlp_c", "mlp_c_skinny", "mlp_c_skinny_c")
MAX_COMPILED_ROWS = 16
_compiled_kernel = mx.compile(lambda x, w: smc.skinny_matmul(x, w))
MODE = {"kernel": None}  # None: MLX; "direct"; "compiled"
_ORIGINAL_LINEAR = nn.Linear.__call__
_ORIGINAL_MULTIPLY = fp.FusedProjection._multiply


def _rows(x) -> int:
    return x.size // x.shape[-1]


def product(x, w):
    if MODE["kernel"] and smc.MIN_ROWS <= _rows(x) <= smc.MAX_ROWS and smc.takes(x, w):
        flat = x.reshape(-1, w.shape[1])
        if MODE["kernel"] == "direct":
            out = smc.skinny_matmul(flat, w)
        else:
            out = _compiled_kernel(flat, w)
        return out.reshape(*x.shape[:-1], w.shape[0])
    return x @ w.T


def linear_call(self, x):
    if MODE["kernel"] is None or "bias" in self:
        return _ORIGINAL_LINEAR(self, x)
    return product(x, self["weight"])


def multiply(self, x, params):
    if MODE["kernel"] is None or self.quantized or "bias" in params:
        return _ORIGINAL_MULTIPLY(self, x, params)
    return product(x, params["weight"])


class CompiledMLP(nn.Module):
    """An MLP compiled for calls of few rows; wider calls (prefill) run it as it is."""

    def __init__(self, mlp):
        super().__init__()
        self.inner = mlp
        self.fn = mx.compile(mlp.__call__)

    def __call__(self, x):
        if _rows(x) <= MAX_COMPILED_ROWS:
            return self.fn(x)
        return self.inner(x)


class Switch:
    """Puts one model in one of WAYS."""

    def __init__(self, model):
        nn.Linear.__call__ = linear_call
        fp.FusedProjection._multiply = multiply
        self.layers = model.layers
        self.mlps = [layer.mlp for layer in self.layers]
        self.compiled = [CompiledMLP(m) for m in self.mlps]

    def use(self, way: str) -> None:
        assert way in WAYS, way
        MODE["kernel"] = {
            "skinny": "direct",
            "skinny_c": "compiled",
            "mlp_c_skinny": "direct",
            "mlp_c_skinny_c": "compiled",
        }.get(way)
        for layer, plain, comp in zip(self.layers, self.mlps, self.compiled):
            layer.mlp = comp if way.startswith("mlp_c") else plain
