"""Where the decode loop's time goes, summed over the engine's life (for profiling and the
benchmark's round breakdown; the live per-request numbers are in SpecStats)."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class StepTiming:
    plain_steps: int = 0
    plain_s: float = 0.0  # pipelined steps: about one forward each
    verify_rounds: int = 0
    plan_s: float = 0.0  # choosing k and proposing host-side drafts (lookup, synthetic)
    draft_model_s: float = 0.0  # the draft model's forwards
    forward_s: float = 0.0  # building and running the target's verify forward
    sample_s: float = 0.0  # picking the target's tokens from the verify logits
    rollback_s: float = 0.0  # acceptance and per-row cache rollback
    output_s: float = 0.0  # detokenizing, stop strings, events

    def add(self, other: StepTiming) -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)

    def per_round_ms(self) -> dict:
        """Mean milliseconds per verify round of each part, and per plain step."""
        out = {"plain_step": 1e3 * self.plain_s / self.plain_steps if self.plain_steps else 0.0}
        n = self.verify_rounds
        for part in ("plan_s", "draft_model_s", "forward_s", "sample_s", "rollback_s", "output_s"):
            out[part[:-2]] = 1e3 * getattr(self, part) / n if n else 0.0
        return {k: round(v, 3) for k, v in out.items()}
