"""The live panel against the real engine (the default model): with speculation off the chat
shows 1.00 tokens per forward, as the engine reports it; "forwards saved" never goes down while
a speculating and a plain reply run together; the panel shows the engine's figures."""

from __future__ import annotations

import pytest
from apphelpers import spin

from app.settings.chat_settings import ChatSettings

pytestmark = pytest.mark.slow

REPLY_TIMEOUT_S = 180.0
PLAIN = ChatSettings(max_tokens=24, temperature=0.0, spec_method="off")


def test_speculation_off_shows_one_token_per_forward(qtbot, real_window):
    w = real_window
    tab = w.current_tab()
    tab.controller.set_settings(PLAIN)
    assert tab.send("Name three colours.")
    assert spin(lambda: not tab.controller.busy, REPLY_TIMEOUT_S)
    stats = tab.controller.last_stats
    card = w.panel.chat_card
    assert card.value("tpf") == "1.00"
    # what the panel shows is what the engine sent
    assert card.value("tokens") == str(stats.generated_tokens)
    assert card.value("tpf") == f"{stats.spec.tokens_per_forward:.2f}"
    assert card.value("acceptance") == "–"  # nothing was drafted
    assert card.verdict() is None  # nothing to lose without speculation
    assert card.value("plain") != "–"  # the engine measured plain decoding for comparison


def test_forwards_saved_never_decreases(qtbot, real_window):
    w = real_window
    seen: list[str] = []

    def shown(_stats) -> None:
        seen.append(w.panel.engine_card.value("saved"))

    w.bridge.statsUpdated.connect(shown)
    first, second = w.current_tab(), w.new_chat()
    first.controller.set_settings(PLAIN.replace(spec_method="lookup", max_tokens=48))
    second.controller.set_settings(PLAIN.replace(max_tokens=32))
    assert first.send("Repeat exactly: the cat sat on the mat. the cat sat on the mat.")
    assert second.send("Count from one to ten.")
    try:
        assert spin(
            lambda: not first.controller.busy and not second.controller.busy, REPLY_TIMEOUT_S
        )
        w.bridge.poll_stats()
    finally:
        w.bridge.statsUpdated.disconnect(shown)
    values = [int(v) for v in seen if v.isdigit()]
    assert values and values == sorted(values), values
    assert w.panel.engine_card.value("saved") == str(w.bridge.stats().spec.forwards_saved)
