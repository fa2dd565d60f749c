"""Whether a ragged batch's plain decode steps run their attention in Tandem's CUDA kernel or in
MLX's own ops, chosen per batch size from what each way measured.

Rows of different lengths decode with a mask over their left padding, and MLX's CUDA backend has
no fused one-query kernel that takes a mask: it runs unfused matmuls and a softmax.
engine/kernels/verify_attention_cuda.py computes such a call in one kernel. Which is faster at
the engine's step depends on the host as much as the GPU: on the H200 the kernel's call alone
was 2.3-4.1x faster than MLX's path and the random 1B decoded four rows at 657-687 tok/s with it
against 500-583 without; on an H100 the plain step was faster without it in six pairs of six
(the 1B at four rows 3.9-4.0 ms against 4.6-5.0), a custom kernel's call costing the host more
there (docs/benchmarks.md, fifth and eighteenth passes). Here each batch size may time both
(engine/core/measured_choice.py) or take one way (EngineConfig.decode_attention_kernel). The
kernel is the default: three more H100s favoured it, and timing both ran at a median 0.95 of it
there (nineteenth pass). Only plain steps are switched and timed: verify forwards (several
queries a row) and drafters keep the kernel wherever it `takes` their calls.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from engine.core.measured_choice import MeasuredChoice
from engine.kernels import verify_attention_cuda

DEFAULT_LEG_STEPS = 16  # a plain step is a few milliseconds on a GPU: legs of 16 steps
# MLX's ops are chosen only where they measured this much faster per token: on an H100 where the
# kernel won a whole run by 5% at sixteen rows, legs of 16 steps found the two level
DEFAULT_MLX_MARGIN = 1.05
# steps on the chosen way before both are timed again: a trial runs half its legs the slower way,
# so at 4096 that costs under 1% where the ways differ by 25%
DEFAULT_RETRY_EVERY = 4096


class KernelChoice(MeasuredChoice):
    """Per batch size: a ragged plain step's attention in the kernel (True) or MLX's ops."""

    names = ("mlx", "kernel")
    prefer = True
    margin = DEFAULT_MLX_MARGIN


class DecodeAttentionChoice:
    """The attention of a ragged batch's plain steps: the kernel, MLX's ops, or as measured."""

    def __init__(self, *, mode: bool | None = None) -> None:
        self.mode = mode  # EngineConfig.decode_attention_kernel: True, False, None (measured)
        self.choice = KernelChoice(leg_steps=DEFAULT_LEG_STEPS, retry_every=DEFAULT_RETRY_EVERY)
        self._launched: tuple[int, bool] | None = None  # the last plain step: rows, way

    @contextmanager
    def launching(self, rows: int) -> Iterator[None]:
        """A plain step of `rows` rows builds its forward within this block."""
        self._launched = None
        # the default (the kernel) and machines without it need no switch: calls go as installed
        if self.mode is True or not verify_attention_cuda.is_installed():
            yield
            return
        way = self.mode if self.mode is not None else self.choice.way(rows)
        if self.mode is None:
            self._launched = (rows, way)  # timed when the next step begins
        with verify_attention_cuda.one_query_calls(way):
            yield

    def step_began(self, last: tuple[int, float] | None) -> None:
        """A step begins. `last`: the step before's tokens a row and cost up to now, when it did
        nothing but decode (timed as a plain step if it launched one)."""
        launched, self._launched = self._launched, None
        if launched is None or last is None or last[0] != 1:
            return
        rows, way = launched
        self.choice.record_way(rows, way=way, seconds=last[1], tokens=rows)

    def summary(self) -> dict[str, dict]:
        """Per batch-size bucket: the way chosen and each way's milliseconds per token."""
        return self.choice.summary()
