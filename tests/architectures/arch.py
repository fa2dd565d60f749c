"""What a catalogue entry is (`Arch`) and the config pieces that several entries share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

S, F = "sliding_attention", "full_attention"
GRANITE = dict.fromkeys(
    ("logits_scaling", "attention_multiplier", "embedding_multiplier", "residual_multiplier"), 1.0
)


@dataclass(frozen=True)
class Arch:
    """An mlx-lm architecture (its module name) and how the matrix builds it small."""

    name: str
    config: dict[str, Any] = field(default_factory=dict)
    unbuildable: str | None = None  # why no small random model of it runs here
    unquantizable: str | None = None  # why it has no 4-bit copy

    @property
    def buildable(self) -> bool:
        return self.unbuildable is None


def text_config(args: str, **config: Any) -> dict[str, Any]:
    """A wrapper model's config: its text model's overrides, the argument class under "args"."""
    return {"text_config": {"args": args, **config}}
