"""Screenshots of the main window with three tabs generating and the live panel open, light and
dark, saved to artifacts/screenshots/ (the real default model). Also checks that the panel moves
while replies stream."""

from __future__ import annotations

import pytest
from apphelpers import ARTIFACTS, spin

from app.settings.chat_settings import ChatSettings
from app.theme import theme_manager

pytestmark = pytest.mark.slow

SHOTS = ARTIFACTS / "screenshots"
WINDOW_SIZE = (1440, 900)
SHOWN_CHARS = 800  # take the shot once the fullest reply has this much text
PROMPTS = [
    (
        "How do I reverse a string in Python? Show the code in a code block, then explain it.",
        "lookup",
    ),
    ("Give me five tips for writing clear emails.", "off"),
    ("Write a short story about a lighthouse keeper.", "auto"),
]


def test_three_tabs_generating_with_panel_light_and_dark(qtbot, real_window):
    w = real_window
    w.resize(*WINDOW_SIZE)
    w.sidebar_dock.show()
    w.panel_dock.show()
    w.panel_dock.raise_()
    tabs = [w.current_tab(), w.new_chat(), w.new_chat()]
    for seed, (tab, (prompt, method)) in enumerate(zip(tabs, PROMPTS), start=1):
        settings = ChatSettings(max_tokens=320, temperature=0.7, seed=seed, spec_method=method)
        tab.controller.set_settings(settings)
        assert tab.send(prompt)
    batches: list[int] = []
    rates: list[float] = []
    w.bridge.statsUpdated.connect(
        lambda s: (batches.append(s.batch_size), rates.append(s.tokens_per_s))
    )

    def reply_chars(tab) -> int:
        return len(tab.controller.model.message(1).content)

    def fullest():
        busy = [t for t in tabs if t.controller.busy] or tabs
        return max(busy, key=reply_chars)

    def showcase():
        """The fullest reply still being written, preferring one with a code block."""
        busy = [t for t in tabs if t.controller.busy] or tabs
        with_code = [t for t in busy if "```" in t.controller.model.message(1).content]
        return max(with_code, key=reply_chars) if with_code else fullest()

    try:
        assert spin(
            lambda: (
                reply_chars(fullest()) >= SHOWN_CHARS or not any(t.controller.busy for t in tabs)
            ),
            300,
        )
        w.tabs.setCurrentWidget(showcase())
        spin(lambda: False, 0.6)  # the panel picks up the chat's next stats
        generating = [t.controller.busy for t in tabs]
        # the panel follows the generation
        assert max(batches) >= 2 and max(rates) > 0
        assert w.panel.chat_card.value("tokens") not in ("–", "0")
        assert len(w.panel.engine_spark.values()) > 3
        SHOTS.mkdir(parents=True, exist_ok=True)
        for theme in ("light", "dark"):
            theme_manager().apply(theme)
            spin(lambda: False, 0.3)  # let the re-render land
            path = SHOTS / f"tandem-{theme}.png"
            assert w.grab().save(str(path))
            print(f"\nsaved {path} (tabs generating: {generating})")
    finally:
        theme_manager().apply("light")
        for tab in tabs:
            tab.stop()
        spin(lambda: all(not t.controller.busy for t in tabs), 30)
