"""The two figures of rounds ahead that the chat and engine cards both show."""

from __future__ import annotations

from app.formatting import fmt_percent
from app.widgets.metric_card import MetricCard
from engine.requests import SpecStats


def show_ahead(card: MetricCard, spec: SpecStats) -> None:
    """The share of verify rounds run ahead, and of those drafted on a guess that proved wrong
    ("–" where there were none)."""
    rounds = spec.rounds + spec.guessed_rounds
    card.set_value("ahead", fmt_percent(spec.ahead_share) if rounds else "–")
    card.set_value("guessed", fmt_percent(spec.guessed_share) if spec.ahead_rounds else "–")
