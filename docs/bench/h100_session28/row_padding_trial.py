"""Few-row MLP calls padded with zero rows where the GPU measured the wider call cheaper.

A matmul library picks its kernel by the number of rows, and its picks are not monotonic: on an
H100, cuBLASLt took longer for the random 8B's projections at 2-5 token rows than at 6-8
(docs/benchmarks.md, eleventh pass: 12.0-13.4 ms a step against 10.2-11.7). A decode step of 2-5
chats and a one-row verify forward of 5 tokens (k=4) run at exactly those widths. Padding such a
call's input with zero rows up to a cheaper width reads the same weights once, in the faster
kernel; the real rows' results are the padded call's first rows (each row of an MLP is computed
on its own, so the zero rows change nothing but, possibly, the kernel's rounding, as any other
batch size does).

Which widths are cheaper is measured once per model, after its weights are loaded: every
compiled MLP of the model (engine/compiled_mlp.py) called on 1 to 16 token rows, in alternated
rounds, the median pass per width. A width is padded to the cheapest wider one only where that
measured at least `DEFAULT_MARGIN` cheaper. Only where MLPs are compiled (on a CUDA GPU by
default); `TANDEM_NO_ROW_PADDING=1` turns it off.
"""

from __future__ import annotations

import dataclasses
import logging
import statistics
import time
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from engine.compiled_mlp import is_compiled, set_row_padding
from engine.kernels.switch import is_set

log = logging.getLogger(__name__)

DISABLE_ENV = "TANDEM_NO_ROW_PADDING"
DEFAULT_ROUNDS = 3  # rounds over all widths: drift (clocks, other load) spreads over every width
DEFAULT_PASSES = 4  # timed passes of every MLP per width and round
# a width is padded only where a wider call measured this much cheaper: the rest is noise
DEFAULT_MARGIN = 0.93
DEFAULT_INPUT_SCALE = 0.02  # inputs of a hidden state's size, so the activations stay finite


def mlp_costs(
    model: nn.Module, *, max_rows: int, rounds: int = DEFAULT_ROUNDS, passes: int = DEFAULT_PASSES
) -> dict[int, float]:
    """Milliseconds of one pass of every compiled MLP of `model` at each width 1..max_rows."""
    mlps = [m for _, m in model.named_modules() if is_compiled(m)]
    width, dtype = _hidden_size(model)
    inputs = {
        n: (DEFAULT_INPUT_SCALE * mx.random.normal((1, n, width))).astype(dtype)
        for n in range(1, max_rows + 1)
    }
    mx.eval(list(inputs.values()))
    seconds: dict[int, list[float]] = {n: [] for n in inputs}
    for r in range(rounds):
        for n, x in inputs.items():
            for i in range(passes + (1 if r == 0 else 0)):  # a width's first call is traced
                mx.synchronize()
                start = time.perf_counter()
                mx.eval([m(x) for m in mlps])
                if r or i:
                    seconds[n].append(time.perf_counter() - start)
    return {n: 1e3 * statistics.median(v) for n, v in seconds.items()}


def _hidden_size(model: nn.Module) -> tuple[int, mx.Dtype]:
    """The width and float type of the model's hidden states, from its token embedding."""
    for _, module in model.named_modules():
        if isinstance(module, (nn.Embedding, nn.QuantizedEmbedding)):
            width = getattr(module, "dims", None) or module.weight.shape[1]
            if isinstance(module, nn.QuantizedEmbedding):
                return width, module.scales.dtype
            return width, module.weight.dtype
    raise ValueError("no token embedding")


def padding_from_costs(costs: dict[int, float], *, margin: float = DEFAULT_MARGIN) -> dict[int, int]:
    """Each width padded to the cheapest wider one, where that is `margin` of its own cost or less."""
    pad_to = {}
    for n, cost in costs.items():
        best = min((m for m in costs if m >= n), key=lambda m: (costs[m], m))
        if best != n and costs[best] <= margin * cost:
            pad_to[n] = best
    return pad_to


def choose_row_padding(model: nn.Module) -> dict[int, int]:
    """Measure `model`'s compiled MLPs and pad their calls where that is cheaper; the table."""
    compiled = [m for _, m in model.named_modules() if is_compiled(m)]
    if not compiled or is_set(DISABLE_ENV):
        return {}
    try:
        max_rows = compiled[0]._tandem_compiled.max_rows
        costs = mlp_costs(model, max_rows=max_rows)
    except Exception as exc:  # noqa: BLE001 - a model this cannot measure runs unpadded
        log.warning("MLP row padding not measured: %s: %s", type(exc).__name__, exc)
        return {}
    pad_to = padding_from_costs(costs)
    set_row_padding(model, pad_to)
    log.info(
        "MLP calls padded %s (ms a pass by width: %s)",
        pad_to or "nowhere",
        {n: round(c, 3) for n, c in costs.items()},
    )
    return pad_to


def with_row_padding(opened: Any) -> Any:
    """`opened` (an engine.models.OpenedModel) whose `finish` first measures the row padding."""
    finish = opened.finish

    def measured_then_finished(model: nn.Module, tokenizer: Any) -> Any:
        choose_row_padding(model)
        return finish(model, tokenizer)

    return dataclasses.replace(opened, finish=measured_then_finished)
