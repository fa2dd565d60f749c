"""Where the decode loop's time goes, summed over the engine's life (for profiling and the
benchmark's round breakdown; the live per-request numbers are in SpecStats)."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass
class StepTiming:
    core_steps: int = 0  # EngineCore.step calls: schedule, execute, update
    core_s: float = 0.0
    plain_steps: int = 0
    plain_s: float = 0.0  # pipelined steps: about one forward each
    plain_launch_s: float = 0.0  # building and queueing the next forward (host work)
    plain_wait_s: float = 0.0  # waiting for the previous forward's tokens
    shared_steps: int = 0  # plain steps whose forward carried prompt chunks too
    shared_tokens: int = 0  # the prompt tokens those carried
    verify_rounds: int = 0
    plan_s: float = 0.0  # choosing k and proposing host-side drafts (lookup, synthetic)
    draft_model_s: float = 0.0  # the draft model's forwards
    forward_s: float = 0.0  # building and running the target's verify forward
    # its two parts: building and queueing it (host work: Python, then MLX's encoding), and
    # waiting for its results (device time the host's work did not cover)
    verify_launch_s: float = 0.0
    verify_wait_s: float = 0.0
    sample_s: float = 0.0  # picking the target's tokens from the verify logits
    rollback_s: float = 0.0  # acceptance and per-row cache rollback
    output_s: float = 0.0  # detokenizing, stop strings, events

    def add(self, other: StepTiming) -> None:
        for name in _FIELDS:  # once per step: no asdict (it deep-copies)
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def per_round_ms(self) -> dict:
        """Mean milliseconds per verify round of each part, and per plain step."""
        p = self.plain_steps
        c = self.core_steps
        out = {
            "core_step": 1e3 * self.core_s / c if c else 0.0,
            "plain_step": 1e3 * self.plain_s / p if p else 0.0,
            "plain_launch": 1e3 * self.plain_launch_s / p if p else 0.0,
            "plain_wait": 1e3 * self.plain_wait_s / p if p else 0.0,
        }
        n = self.verify_rounds
        for part in (
            "plan_s",
            "draft_model_s",
            "forward_s",
            "verify_launch_s",
            "verify_wait_s",
            "sample_s",
            "rollback_s",
            "output_s",
        ):
            out[part[:-2]] = 1e3 * getattr(self, part) / n if n else 0.0
        return {k: round(v, 3) for k, v in out.items()}


_FIELDS = tuple(f.name for f in fields(StepTiming))
