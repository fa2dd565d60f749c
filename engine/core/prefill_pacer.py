"""How many prompt tokens a step may prefill while other chats are decoding.

A long prompt is processed in chunks between decode steps. A fixed chunk makes running chats wait
for it: on a 2-core CPU a 512-token chunk deep into an 8k prompt took tens of seconds, and every
running chat waited that long between two tokens. The pacer measures what a decode step and a
prompt token cost on this machine, at this context length, and sizes each step's chunk so that a
step with prefill takes about `gap_factor` times a plain decode step: running chats keep a bounded
gap, and the prompt still gets (gap_factor - 1) / gap_factor of the time, so its first token comes
within gap_factor / (gap_factor - 1) of prefilling it alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.config import DEFAULT_PREFILL_GAP_FACTOR

DEFAULT_MIN_CHUNK = 16  # below this a prompt would barely move
DEFAULT_SMOOTHING = 0.3  # weight of the newest measurement in the running means


@dataclass
class PrefillPacer:
    """Each step's prefill budget, from measured decode-step and per-token prefill costs."""

    max_chunk: int
    gap_factor: float | None = DEFAULT_PREFILL_GAP_FACTOR  # None: always whole chunks
    min_chunk: int = DEFAULT_MIN_CHUNK
    decode_s: float | None = None  # a step that only decodes
    token_s: float | None = None  # one prompt token, beside the decode rows

    def budget(self, *, decoding: bool) -> int:
        """Prompt tokens the next step may process (`decoding`: other rows are running)."""
        if self.gap_factor is None or not decoding:
            return self.max_chunk
        if self.decode_s is None or self.token_s is None:
            return self.max_chunk  # nobody waits, or nothing measured yet
        allowed = (self.gap_factor - 1.0) * self.decode_s / max(self.token_s, 1e-9)
        return max(self.min_chunk, min(self.max_chunk, round(allowed)))

    def observe(self, seconds: float, *, prefill_tokens: int, decoding: bool) -> None:
        """One step's wall time, with what it did."""
        if seconds <= 0:
            return
        if decoding and prefill_tokens == 0:
            self.decode_s = _mean(self.decode_s, seconds)
        elif prefill_tokens > 0:
            base = self.decode_s if decoding and self.decode_s is not None else 0.0
            per_token = max(seconds - base, 0.0) / prefill_tokens
            self.token_s = _mean(self.token_s, per_token)


def _mean(old: float | None, new: float) -> float:
    return new if old is None else (1 - DEFAULT_SMOOTHING) * old + DEFAULT_SMOOTHING * new
