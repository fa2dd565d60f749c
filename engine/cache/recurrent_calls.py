"""The recurrence calls a captured verify forward records (engine/cache/recurrent_capture.py),
one kind per shape of layer, each able to run again from the state before the forward over the
positions each row kept (`rerun(state, mask, lengths)`: `mask` [B, width] marks them, `lengths`
counts them)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import mlx.nn as nn


@dataclass
class RecurrenceCall:
    """One call of a recurrence function during a captured forward, with its arguments; the
    function takes its state and a mask of the positions to run as arguments."""

    fn: Callable[..., tuple[mx.array, mx.array]]
    arguments: inspect.BoundArguments
    state_name: str = "state"  # the argument that holds the state before the call
    time_axis: int = 1  # of its first input

    @property
    def state(self) -> Any:
        return self.arguments.arguments.get(self.state_name)

    @property
    def mask(self) -> Any:
        return self.arguments.arguments.get("mask")

    @property
    def width(self) -> int:
        return self.arguments.args[0].shape[self.time_axis]

    def rerun(self, state: mx.array, mask: mx.array, lengths: mx.array) -> mx.array:
        """The state after running the same inputs from `state` over each row's first
        lengths[i] positions (`mask`: those positions)."""
        arguments = dict(self.arguments.arguments)
        arguments[self.state_name], arguments["mask"] = state, mask
        if "lengths" in self.arguments.signature.parameters:  # ssm_update reads its state there
            arguments["lengths"] = lengths
        bound = inspect.BoundArguments(self.arguments.signature, arguments)  # type: ignore[arg-type]
        return self.fn(*bound.args, **bound.kwargs)[1]


@dataclass
class BlockCall:
    """One Mamba 1 mixer run (Mamba, Falcon-Mamba, Jamba) during a captured forward: its input
    (before the in-projection) and its conv and SSM state from before the forward."""

    block: Any
    x: mx.array
    conv_state: mx.array
    state: mx.array
    per_token: bool  # Mamba's `ssm_step` takes one token; Jamba's the whole sequence
    mask: Any = None

    @property
    def width(self) -> int:
        return self.x.shape[1]

    def rerun(self, state: mx.array, mask: mx.array, lengths: mx.array) -> mx.array:
        """The state after each row's first lengths[i] positions (`mask`: those positions):
        the block's own steps again over the same inputs, a position kept only where masked."""
        block = self.block
        x, _ = block.in_proj(self.x).split(indices_or_sections=2, axis=-1)
        u = nn.silu(block.conv1d(mx.concatenate([self.conv_state, x], axis=1)))
        A = -mx.exp(block.A_log)
        keep_shape = (-1,) + (1,) * (state.ndim - 1)
        if self.per_token:
            for t in range(u.shape[1]):
                _, new = block.ssm_step(u[:, t], A, state)
                state = mx.where(mask[:, t].reshape(keep_shape), new, state)
            return state
        # it returns only the last position's state: one run per length a row may keep
        out = state
        for n in range(1, u.shape[1] + 1):
            _, new = block.ssm_step(u[:, :n], A, state)
            out = mx.where((lengths == n).reshape(keep_shape), new, out)
        return out


@dataclass
class ScanCall:
    """One linear scan h_t = a_t * h_(t-1) + x_t (RecurrentGemma's `rnn_scan(x, a, h0)`), with
    its inputs and the state from before the forward."""

    x: mx.array
    a: mx.array
    state: mx.array
    mask: Any = None

    @classmethod
    def recorded(cls, x: mx.array, a: mx.array, h0: Any) -> ScanCall | None:
        """The call to record for these arguments (None without a state: not a verify)."""
        return None if h0 is None else cls(x, a, h0)

    @property
    def width(self) -> int:
        return self.x.shape[1]

    def rerun(self, state: mx.array, mask: mx.array, lengths: mx.array) -> mx.array:
        """The same steps (as the scan takes one token: a * h + x), a position kept only where
        masked."""
        for t in range(self.width):
            new = self.a[:, t] * state + self.x[:, t]
            state = mx.where(mask[:, t : t + 1], new, state)
        return state


@dataclass
class PrefixCall:
    """One call of a layer's recurrence over a sequence that returns only the last state
    (RWKV 7's `_wkv7(r, w, k, v, a, b, state)`), with its inputs along axis 1."""

    fn: Callable[..., tuple[mx.array, mx.array]]  # bound to its layer
    inputs: tuple[mx.array, ...]
    state: mx.array
    mask: Any = None

    @property
    def width(self) -> int:
        return self.inputs[0].shape[1]

    def rerun(self, state: mx.array, mask: mx.array, lengths: mx.array) -> mx.array:
        """One run per length a row may keep, over that prefix, from `state` (the layer's own
        code, so the state is the one a forward over the prefix leaves, on every backend)."""
        keep_shape = (-1,) + (1,) * (state.ndim - 1)
        out = state
        for n in range(1, self.width + 1):
            _, new = self.fn(*(x[:, :n] for x in self.inputs), state)
            out = mx.where((lengths == n).reshape(keep_shape), new, out)
        return out


@dataclass
class GlaCall:
    """One gated linear attention recurrence over axis 2 (Bailing linear's
    `recurrent_gla(q, k, v, g, scale, h)`: h_t = h_(t-1) * exp(g) + k_t^T v_t)."""

    k: mx.array  # [B, H, T, K]
    v: mx.array  # [B, H, T, V]
    g: mx.array  # [H]
    dtype: mx.Dtype  # the queries' (the decay is cast to it)
    state: mx.array  # [B, H, K, V]
    mask: Any = None

    @classmethod
    def recorded(
        cls, q: mx.array, k: mx.array, v: mx.array, g: mx.array, scale: float, h: Any
    ) -> GlaCall | None:
        """The call to record for these arguments (None without a state: not a verify)."""
        return None if h is None else cls(k, v, g, q.dtype, h)

    @property
    def width(self) -> int:
        return self.k.shape[2]

    def rerun(self, state: mx.array, mask: mx.array, lengths: mx.array) -> mx.array:
        """The same steps (the function's own arithmetic), a position kept only where masked."""
        decay = mx.exp(self.g)[:, None, None].astype(self.dtype)
        for t in range(self.width):
            k_t, v_t = self.k[:, :, t : t + 1], self.v[:, :, t : t + 1]
            new = state * decay + k_t.transpose(0, 1, 3, 2) @ v_t
            state = mx.where(mask[:, t].reshape(-1, 1, 1, 1), new, state)
        return state


Call = RecurrenceCall | BlockCall | ScanCall | PrefixCall | GlaCall
