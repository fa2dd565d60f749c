"""A verify forward in flight: what DecodeBatch.verify_launch queued and verify_collect reads."""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx

from engine.cache import recurrent_capture
from engine.cache.recurrent import RecurrentSnapshot


@dataclass
class Verify:
    """A verify forward in flight (DecodeBatch.verify_launch)."""

    x: list[list[int]]  # per row: replayed tokens, the pending token, the draft (unpadded)
    drafts: list[list[int]]
    logits: mx.array
    snapshot: RecurrentSnapshot | None  # recurrent state from before the forward
    starts: list[int]  # each row's position of x[i][0]
    hidden: mx.array | None = None  # [B, width, d] when hidden states were wanted
    capture: recurrent_capture.ForwardCapture | None = None  # what the recurrent layers were fed
    wait_s: float = 0.0  # how long verify_collect waited for the logits
