"""How many prompt tokens a step may prefill while other chats are decoding.

A long prompt is processed in chunks between decode steps. A fixed chunk makes running chats wait
for it: on a 2-core CPU a 512-token chunk deep into a long prompt took seconds, and every running
chat waited that long between two tokens. The pacer measures a decode step on this machine and
how long each step with prefill took, and resizes the chunk after each such step so that the step
takes about `gap_factor` decode steps: running chats keep a bounded gap, and the prompt still gets
(gap_factor - 1) / gap_factor of the time. Measuring the step itself, not a model of its cost,
keeps it right as the prompt's context grows and on machines where a small forward has a large
fixed cost.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.config import DEFAULT_PREFILL_GAP_FACTOR

DEFAULT_MIN_CHUNK = 16  # below this a prompt would barely move
DEFAULT_FIRST_CHUNK = 64  # beside decoding rows, before a step with prefill was measured
DEFAULT_SMOOTHING = 0.3  # weight of the newest decode step in the running mean
MAX_RESIZE = 2.0  # the chunk changes at most this factor per step (one noisy step moves it little)


@dataclass
class PrefillPacer:
    """Each step's prefill budget, resized from the measured cost of the last steps."""

    max_chunk: int
    gap_factor: float | None = DEFAULT_PREFILL_GAP_FACTOR  # None: always whole chunks
    min_chunk: int = DEFAULT_MIN_CHUNK
    decode_s: float | None = None  # a step that only decodes (running mean)
    chunk: int = DEFAULT_FIRST_CHUNK  # the budget while rows decode

    def budget(self, *, decoding: bool) -> int:
        """Prompt tokens the next step may process (`decoding`: other rows are running)."""
        if self.gap_factor is None or not decoding:
            return self.max_chunk  # nobody waits
        return max(self.min_chunk, min(self.max_chunk, self.chunk))

    def observe(self, seconds: float, *, prefill_tokens: int, decoding: bool) -> None:
        """One step's wall time, with what it did."""
        if seconds <= 0 or not decoding:
            return
        if prefill_tokens == 0:
            old = self.decode_s
            self.decode_s = seconds if old is None else old + DEFAULT_SMOOTHING * (seconds - old)
            return
        if self.decode_s is None or self.gap_factor is None:
            return
        spent = max(seconds - self.decode_s, 1e-6)  # what the prompt's tokens took
        wanted = (self.gap_factor - 1.0) * self.decode_s
        scale = min(MAX_RESIZE, max(1.0 / MAX_RESIZE, wanted / spent))
        self.chunk = max(self.min_chunk, min(self.max_chunk, round(prefill_tokens * scale)))
