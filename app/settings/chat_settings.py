"""Per-chat generation settings (with app-wide defaults) and their translation into the engine's
request dataclasses."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from engine.requests import (
    DEFAULT_DRAFT_TOKENS,
    DEFAULT_NGRAM_MAX,
    DEFAULT_NGRAM_MIN,
    DRAFT_HEAD,
    MAX_DRAFT_TOKENS,
    MAX_NGRAM,
    SamplingParams,
    SpecMethod,
    SpeculativeParams,
)

DEFAULT_TEMPERATURE = 0.7
DEFAULT_TOP_P = 0.95
DEFAULT_TOP_K = 0
DEFAULT_MIN_P = 0.05
DEFAULT_REPETITION_PENALTY = 1.1
DEFAULT_MAX_TOKENS = 512
MAX_MAX_TOKENS = 32768

# What the user may pick (SYNTHETIC is for benchmarks only).
SPEC_METHOD_LABELS: dict[str, str] = {
    SpecMethod.OFF.value: "Off",
    SpecMethod.DRAFT_MODEL.value: "Draft model",
    SpecMethod.PROMPT_LOOKUP.value: "Prompt lookup",
    SpecMethod.AUTO.value: "Auto",
    SpecMethod.MTP.value: "MTP",
}
# One line each, in the settings and as tooltips: what the method does and when it helps.
SPEC_METHOD_DESCRIPTIONS: dict[str, str] = {
    SpecMethod.OFF.value: "Plain decoding, one token per step: best when drafts keep missing.",
    SpecMethod.DRAFT_MODEL.value: (
        "A small model with the same tokenizer guesses ahead: helps when it is much faster "
        "than this chat's model and usually agrees with it."
    ),
    SpecMethod.PROMPT_LOOKUP.value: (
        "Guesses ahead by copying text already in the chat: helps when the reply repeats it "
        "(code edits, quotes, summaries)."
    ),
    SpecMethod.AUTO.value: (
        "Guesses ahead only while it pays (draft model, else the model's own draft head or "
        "MTP layers, else prompt lookup): helps when unsure which to pick."
    ),
    SpecMethod.MTP.value: (
        "The model's own multi-token-prediction layers guess ahead: helps when its checkpoint "
        "carries them (Qwen3.5/3.6, DeepSeek-V3, GLM-4.5, MiMo)."
    ),
}
# who drafted a reply's rounds (SpecStats.rounds_by_drafter), in the live panel
DRAFTER_LABELS: dict[str, str] = {
    **SPEC_METHOD_LABELS,
    DRAFT_HEAD: "Draft head",
    SpecMethod.SYNTHETIC.value: "Synthetic",
}


def describe_drafters(rounds_by_drafter: dict[str, int]) -> str:
    """Each drafter's share of a reply's verify rounds, the most first ("Prompt lookup 70% ·
    Draft head 30%"); one drafter by its name alone; "–" before any round."""
    counts = sorted(((k, n) for k, n in rounds_by_drafter.items() if n > 0), key=lambda i: -i[1])
    total = sum(n for _, n in counts)
    if not total:
        return "–"
    if len(counts) == 1:
        return DRAFTER_LABELS.get(counts[0][0], counts[0][0])
    return " · ".join(f"{DRAFTER_LABELS.get(k, k)} {round(100 * n / total)}%" for k, n in counts)


NO_MTP_REASON = "this model's checkpoint has no MTP layers"
UNKNOWN_MTP_REASON = "whether this model has MTP layers is known once it is loaded"


def spec_method_refusal(
    method: str, *, speculation_note: str | None = None, has_mtp: bool | None = False
) -> str | None:
    """Why a model cannot run `method` (None: it can): a model that cannot speculate at all
    refuses every speculative method with its note; only models with MTP layers run "mtp"
    (`has_mtp` None: not known yet)."""
    if method == SpecMethod.OFF.value:
        return None
    if speculation_note:
        return speculation_note
    if method == SpecMethod.MTP.value and not has_mtp:
        return UNKNOWN_MTP_REASON if has_mtp is None else NO_MTP_REASON
    return None


@dataclass(frozen=True)
class ChatSettings:
    model: str | None = None  # a folder or repo id; None: the engine's default model
    spec_method: str = SpecMethod.OFF.value
    draft_tokens: int = DEFAULT_DRAFT_TOKENS
    draft_model: str | None = None
    ngram_min: int = DEFAULT_NGRAM_MIN
    ngram_max: int = DEFAULT_NGRAM_MAX
    temperature: float = DEFAULT_TEMPERATURE
    top_p: float = DEFAULT_TOP_P
    top_k: int = DEFAULT_TOP_K
    min_p: float = DEFAULT_MIN_P
    repetition_penalty: float = DEFAULT_REPETITION_PENALTY
    seed: int | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS

    # -- (de)serialisation ---------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, *, base: ChatSettings | None = None):
        """Settings from stored data: unknown keys are ignored, bad values fall back to `base`."""
        base = base or cls()
        if not data:
            return base
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name not in data:
                continue
            default = getattr(base, f.name)
            values[f.name] = _coerce(data[f.name], default, f.name)
        return dataclasses.replace(base, **values).normalized()

    def replace(self, **changes: Any) -> ChatSettings:
        return dataclasses.replace(self, **changes).normalized()

    def normalized(self) -> ChatSettings:
        """Clamp every value into its valid range."""
        method = (
            self.spec_method if self.spec_method in SPEC_METHOD_LABELS else SpecMethod.OFF.value
        )
        ngram_min = _clamp(self.ngram_min, 1, MAX_NGRAM)
        return dataclasses.replace(
            self,
            model=self.model or None,
            draft_model=self.draft_model or None,
            spec_method=method,
            draft_tokens=_clamp(self.draft_tokens, 1, MAX_DRAFT_TOKENS),
            ngram_min=ngram_min,
            ngram_max=_clamp(self.ngram_max, ngram_min, MAX_NGRAM),
            temperature=max(0.0, min(float(self.temperature), 5.0)),
            top_p=max(0.0, min(float(self.top_p), 1.0)),
            top_k=max(0, int(self.top_k)),
            min_p=max(0.0, min(float(self.min_p), 1.0)),
            repetition_penalty=max(0.5, min(float(self.repetition_penalty), 3.0)),
            max_tokens=_clamp(self.max_tokens, 1, MAX_MAX_TOKENS),
        )

    # -- the engine's view -----------------------------------------------------------------------

    def sampling_params(self) -> SamplingParams:
        return SamplingParams(
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            min_p=self.min_p,
            repetition_penalty=self.repetition_penalty,
            seed=self.seed,
        )

    @property
    def uses_draft_model(self) -> bool:
        return self.spec_method in (SpecMethod.DRAFT_MODEL.value, SpecMethod.AUTO.value)

    def speculative_params(self) -> SpeculativeParams:
        return SpeculativeParams(
            method=SpecMethod(self.spec_method),
            draft_tokens=self.draft_tokens,
            ngram_min=self.ngram_min,
            ngram_max=self.ngram_max,
            draft_model=self.draft_model if self.uses_draft_model else None,
        )

    def describe_speculation(self) -> str:
        """A short label for the panel, e.g. "Prompt lookup, k=4, n-gram 1-4"."""
        label = SPEC_METHOD_LABELS[self.spec_method]
        if self.spec_method == SpecMethod.OFF.value:
            return label
        auto = self.spec_method == SpecMethod.AUTO.value
        parts = [label] if auto else [label, f"k={self.draft_tokens}"]
        if self.spec_method in (SpecMethod.PROMPT_LOOKUP.value, SpecMethod.AUTO.value):
            parts.append(f"n-gram {self.ngram_min}-{self.ngram_max}")
        if self.draft_model and self.uses_draft_model:
            parts.append(f"draft {_short_name(self.draft_model)}")
        elif self.spec_method == SpecMethod.DRAFT_MODEL.value:
            parts.append("no draft model chosen")
        return ", ".join(parts)


def _short_name(path: str | None) -> str:
    if not path:
        return ""
    return path.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]


def _clamp(value: Any, low: int, high: int) -> int:
    return max(low, min(int(value), high))


def _coerce(value: Any, default: Any, name: str) -> Any:
    if name in ("model", "draft_model"):
        return str(value) if value else None
    if name == "seed":
        try:
            return None if value is None or value == "" else int(value)
        except (TypeError, ValueError):
            return default
    try:
        return type(default)(value)
    except (TypeError, ValueError):
        return default
