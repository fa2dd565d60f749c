"""Is a chat's speculation paying off? A verdict, in words, from the figures the engine sends with
a reply (RequestStats): decode speed against the same reply's speed had it drafted nothing
(estimated by the engine from its measured step costs), and draft acceptance over the last
rounds."""

from __future__ import annotations

from dataclasses import dataclass

from app.formatting import fmt_percent, fmt_rate
from app.settings.chat_settings import SPEC_METHOD_LABELS
from engine.requests import RequestStats, SpecMethod

DEFAULT_SLOWER_MARGIN = 0.05  # slower than plain by more than this counts as losing
DEFAULT_MIN_ACCEPTANCE = 0.3  # recent acceptance below this counts as losing
DEFAULT_MIN_ROUNDS = 8  # verify rounds before acceptance is judged
DEFAULT_MIN_TOKENS = 16  # generated tokens before speed is judged


@dataclass(frozen=True)
class Verdict:
    """What the panel says about a chat's speculation."""

    kind: str  # "losing" or "plain" (the engine runs this row without speculation)
    message: str
    suggestions: tuple[str, ...] = ()  # SpecMethod values to offer, best first


def judge(
    stats: RequestStats | None,
    method: str,
    *,
    slower_margin: float = DEFAULT_SLOWER_MARGIN,
    min_acceptance: float = DEFAULT_MIN_ACCEPTANCE,
) -> Verdict | None:
    """A verdict when speculation loses or is not running; None when all is well."""
    if stats is None or method == SpecMethod.OFF.value:
        return None
    if stats.speculation_note:
        return Verdict("plain", f"Running without speculation: {stats.speculation_note}")
    suggestions = _suggestions(method)
    name = SPEC_METHOD_LABELS.get(method, method)
    plain = stats.plain_tokens_per_s
    speed = stats.decode_tokens_per_s
    if plain and speed and stats.generated_tokens >= DEFAULT_MIN_TOKENS:
        if speed < plain * (1.0 - slower_margin):
            return Verdict(
                "losing",
                f"{name} is slowing this chat down: {fmt_rate(speed)} against "
                f"an estimated {fmt_rate(plain)} without it.",
                suggestions,
            )
    acceptance = stats.recent_acceptance
    if acceptance is not None and stats.spec.rounds >= DEFAULT_MIN_ROUNDS:
        if acceptance < min_acceptance:
            return Verdict(
                "losing",
                f"{name} is mostly guessing wrong: {fmt_percent(acceptance)} of recent drafts "
                "accepted, so each verify step does extra work for little gain.",
                suggestions,
            )
    return None


def _suggestions(method: str) -> tuple[str, ...]:
    if method == SpecMethod.AUTO.value:
        return (SpecMethod.OFF.value,)
    return (SpecMethod.AUTO.value, SpecMethod.OFF.value)
