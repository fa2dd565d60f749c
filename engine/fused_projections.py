"""Sibling projections of one input as one matmul: q/k/v, gate/up and their kin.

Most attention blocks call `q_proj(x)`, `k_proj(x)` and `v_proj(x)` on the same `x`, and most MLPs
`gate_proj(x)` and `up_proj(x)`: three and two matmuls that read `x` again and launch again.
`fuse_projections(model)` stacks each such group's weights (rows one after another) into one
`FusedProjection`; the siblings become `ProjectionPart`s that return their columns of the group's
one product. Each output column is the same dot product over the same weight row as before:
bit-identical in an H100 probe (bfloat16, a 4 x 64-token forward of a random 8B and 1B) and with
MLX's own CPU matmul; OpenBLAS (Tandem's Linux CPU BLAS) sums a prefill-wide product's columns in
another order, within float rounding, as it already does a batch's rows against one row alone, and
the exactness suite's tokens stay mlx_lm.generate's. On an H100, alternated in one process, fused
decoding ran ahead at 18 of 22 points (random 8B, 1B and Qwen3.5-shaped 1B; plain and speculative;
1 to 16 rows), by 15-47% at 16 rows, where launches are much of a step's cost; on the 2-core CPU it
is neutral (docs/benchmarks.md).

Whether the siblings really share `x` is only known when the model runs: a part called on
another `x` than the pending product's computes its own rows, and a group that misses that way
a few times in a row stops fusing. Nothing is ever computed from a stale product: a part reads
one only for the very `x` object it was computed from. `TANDEM_NO_FUSED_PROJECTIONS=1` keeps
the model as mlx-lm built it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import mlx.core as mx
import mlx.nn as nn

from engine.kernels.switch import is_set

log = logging.getLogger(__name__)

DISABLE_ENV = "TANDEM_NO_FUSED_PROJECTIONS"
# Children of one module called on the same input, by mlx-lm's names (a group may be partial).
DEFAULT_SIBLINGS: tuple[tuple[str, ...], ...] = (
    ("q_proj", "k_proj", "v_proj"),
    ("gate_proj", "up_proj"),
    ("q_a_proj", "kv_a_proj_with_mqa"),  # DeepSeek's MLA with a low-rank query
    ("in_proj_qkvz", "in_proj_ba"),  # Qwen3-Next's linear attention
    ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a"),  # Qwen3.5's linear attention
    ("w1", "w3"),
)
PARAMETERS = ("weight", "scales", "biases", "bias")  # a linear's arrays, stacked by rows
DEFAULT_MAX_MISSES = 3  # products in a row left unread before a group stops fusing


class _Shipped:
    """Whether every group computes its siblings apart, as mlx-lm's model does (baselines)."""

    on = False


_SHIPPED = _Shipped()


def _signature(linear: nn.Module) -> tuple | None:
    """What must match for two linears to share one matmul; None where it cannot be fused."""
    weight = linear.get("weight")
    if not isinstance(weight, mx.array) or weight.ndim != 2:
        return None
    if type(linear) is nn.Linear:
        return ("linear", weight.dtype, weight.shape[1], "bias" in linear)
    if type(linear) is nn.QuantizedLinear:
        quant = (linear.group_size, linear.bits, linear.mode, "biases" in linear)
        return ("quantized", weight.dtype, weight.shape[1], "bias" in linear, *quant)
    return None


class FusedProjection(nn.Module):
    """The stacked weights of sibling projections and the one product they share."""

    def __init__(self, linears: list[nn.Module], *, max_misses: int = DEFAULT_MAX_MISSES) -> None:
        super().__init__()
        first = linears[0]
        self.quantized = type(first) is nn.QuantizedLinear
        if self.quantized:
            self.group_size, self.bits, self.mode = first.group_size, first.bits, first.mode
        for key in PARAMETERS:
            if key in first:
                setattr(self, key, mx.concatenate([m[key] for m in linears], axis=0))
        rows = [m["weight"].shape[0] for m in linears]
        edges = tuple((sum(rows[:i]), sum(rows[: i + 1])) for i in range(len(rows)))
        self._state = _Sharing(edges, max_misses)  # a plain object: no parameters in it

    @property
    def sharing(self) -> bool:
        """Still one product for the siblings (False once they proved not to share `x`)."""
        return self._state.sharing

    def part(self, index: int, x: mx.array) -> mx.array:
        """Sibling `index`'s output for `x`: its columns of the shared product where that is
        for this very `x`, its own rows' product otherwise."""
        state = self._state
        pending = state.pending  # read once: its input and product always belong together
        if pending is not None and pending.x is x and index not in pending.taken:
            return self._take(pending, index)
        if not state.sharing or _SHIPPED.on:
            return self._alone(x, index)
        if pending is not None:  # the last product was not read by every sibling
            state.misses += 1
            if state.misses >= state.max_misses:
                state.sharing, state.pending = False, None
                log.info("projections %s stop sharing one matmul", state.edges)
                return self._alone(x, index)
        if state.whole is None:
            state.whole = {k: self[k] for k in PARAMETERS if k in self}
        pending = _Pending(x, self._multiply(x, state.whole))
        state.pending = pending
        return self._take(pending, index)

    def _take(self, pending: _Pending, index: int) -> mx.array:
        state = self._state
        lo, hi = state.edges[index]
        pending.taken.add(index)
        if len(pending.taken) == len(state.edges):  # every sibling read it: let it go
            state.pending = None
            state.misses = 0
        return pending.product[..., lo:hi]

    def _alone(self, x: mx.array, index: int) -> mx.array:
        """Sibling `index`'s own product, from views of its rows (made once: no per-call ops)."""
        state = self._state
        if state.rows[index] is None:
            lo, hi = state.edges[index]
            state.rows[index] = {k: self[k][lo:hi] for k in PARAMETERS if k in self}
        return self._multiply(x, state.rows[index])

    def _multiply(self, x: mx.array, params: dict[str, mx.array]) -> mx.array:
        if self.quantized:
            out = mx.quantized_matmul(
                x,
                params["weight"],
                scales=params["scales"],
                biases=params.get("biases"),
                transpose=True,
                group_size=self.group_size,
                bits=self.bits,
                mode=self.mode,
            )
            return out + params["bias"] if "bias" in params else out
        if "bias" in params:
            return mx.addmm(params["bias"], x, params["weight"].T)
        return x @ params["weight"].T


class _Pending:
    """One input's product, and which siblings took their columns of it."""

    def __init__(self, x: mx.array, product: mx.array) -> None:
        self.x = x
        self.product = product
        self.taken: set[int] = set()


class _Sharing:
    """A group's running state: its pending product, its misses, whether it still shares."""

    def __init__(self, edges: tuple[tuple[int, int], ...], max_misses: int) -> None:
        self.edges = edges  # each sibling's columns of the product
        self.max_misses = max_misses
        self.misses = 0
        self.sharing = True
        self.pending: _Pending | None = None
        self.whole: dict[str, mx.array] | None = None  # the group's arrays, once looked up
        self.rows: list[dict[str, mx.array] | None] = [None] * len(edges)  # views, once made


class _GroupRef:
    """Holds a part's group outside mlx's module tree (its weights are listed once, there)."""

    def __init__(self, group: FusedProjection) -> None:
        self.group = group


class ProjectionPart(nn.Module):
    """One sibling of a fused group: called as the linear it replaces."""

    def __init__(self, group: FusedProjection, index: int) -> None:
        super().__init__()
        self._ref = _GroupRef(group)
        self._index = index

    def __call__(self, x: mx.array) -> mx.array:
        return self._ref.group.part(self._index, x)


def _alike(module: nn.Module, names: tuple[str, ...]) -> list[list[str]]:
    """The siblings of `names` in `module` that can share a matmul, by signature, two or more
    each: a mixed-precision model's 4-bit q/k fuse while its 8-bit v stays alone."""
    by_signature: dict[tuple, list[str]] = {}
    for name in names:
        child = module.get(name)
        signature = _signature(child) if isinstance(child, nn.Module) else None
        if signature is not None:
            by_signature.setdefault(signature, []).append(name)
    return [members for members in by_signature.values() if len(members) > 1]


def fuse_projections(
    model: nn.Module, *, siblings: tuple[tuple[str, ...], ...] = DEFAULT_SIBLINGS
) -> int:
    """Fuse every group of sibling projections in `model` in place (lazy weights stay lazy);
    returns how many groups were fused. Does nothing where `TANDEM_NO_FUSED_PROJECTIONS` is
    set."""
    if is_set(DISABLE_ENV):
        return 0
    fused = 0
    for _, module in list(model.named_modules()):
        for names in siblings:
            for members in _alike(module, names):
                group = FusedProjection([module[n] for n in members])
                module["fused_" + "_".join(members)] = group
                for index, name in enumerate(members):
                    module[name] = ProjectionPart(group, index)
                fused += 1
    if fused:
        log.info("%d groups of sibling projections fused into one matmul each", fused)
    return fused


@contextmanager
def separate_projections() -> Iterator[None]:
    """Within the block every fused group runs its siblings as separate matmuls, as mlx-lm
    ships the model: a benchmark's baselines on the very same weights."""
    before, _SHIPPED.on = _SHIPPED.on, True
    try:
        yield
    finally:
        _SHIPPED.on = before


def fused_groups(model: nn.Module) -> list[FusedProjection]:
    """The model's fused groups (tests and benchmarks: which still share their product)."""
    return [m for _, m in model.named_modules() if isinstance(m, FusedProjection)]
