"""Screenshots of the chat history features, light and dark, saved to artifacts/screenshots/:
a reply with versions ("‹ 2/2 ›"), an edited question, a reply cut at max tokens with Continue,
a queued message, the context meter and the sidebar's marks (pinned, open, writing)."""

from __future__ import annotations

from apphelpers import ARTIFACTS, spin

from app.settings.chat_settings import ChatSettings
from app.theme import theme_manager

SHOTS = ARTIFACTS / "screenshots"
WINDOW_SIZE = (1440, 900)

FIRST_REPLY = (
    "Day one: start in **Alfama**. Walk up to the Castelo de São Jorge early, then wander down "
    "through the lanes to the cathedral. Lunch at a tasca, and hear fado in the evening."
)
SECOND_REPLY = (
    "Here is a relaxed plan:\n\n"
    "1. **Day one — Alfama and Baixa.** The castle in the morning, the Miradouro de Santa "
    "Luzia at noon, Praça do Comércio at sunset.\n"
    "2. **Day two — Belém.** The Jerónimos Monastery, the tower, and pastéis de nata.\n"
    "3. **Day three — Sintra.** Pena Palace and Quinta da Regaleira by train."
)
LONG_REPLY = (
    "Lisbon in May is warm and bright. Pack light layers, good walking shoes for the hills and "
    "cobblestones, and a light jacket for the evenings by the river, which can be windy. Tram 28 "
    "is busy from ten in the morning, so ride it early or walk the route instead."
)


def _build_chat(window, fake_engine):
    tab = window.current_tab()
    controller = tab.controller
    controller.set_settings(ChatSettings(max_tokens=400, spec_method="lookup", draft_tokens=4))
    fake_engine.reply = FIRST_REPLY
    tab.send("Can you plan a 3-day trip to Lisbon for me in May?")
    assert spin(lambda: not controller.busy, 10)
    fake_engine.reply = SECOND_REPLY
    assert controller.regenerate()
    assert spin(lambda: not controller.busy, 10)
    controller.set_settings(controller.settings.replace(max_tokens=22))
    fake_engine.reply = LONG_REPLY
    tab.send("What should I pack?")
    assert spin(lambda: not controller.busy, 10)
    return tab


def test_history_screens_light_and_dark(qtbot, window, fake_engine, store):
    window.resize(*WINDOW_SIZE)
    window.sidebar_dock.show()
    for title, text in (("Rust lifetimes", "Explain 'a"), ("Sourdough starter", "Feed ratio?")):
        other = window.new_chat()
        fake_engine.reply = "A short answer."
        other.send(text)
        assert spin(lambda o=other: not o.controller.busy, 10)
        other.controller.rename(title)
    window.sidebar.toggle_pin(other.controller.conversation.id)
    window.tabs.setCurrentIndex(0)
    tab = _build_chat(window, fake_engine)
    controller = tab.controller
    bubbles = tab.view.bubbles()
    assert bubbles[1].versions.text() == "‹ 2/2 ›" and bubbles[1].versions.isVisible()
    assert bubbles[3].badge_text() == "cut at max tokens" and bubbles[3].continue_button.isVisible()
    # a writing chat in the sidebar, and a queued message in it
    busy = window.tab(1)
    fake_engine.token_delay_s = 0.2
    busy.controller.set_settings(ChatSettings(max_tokens=400))
    busy.send("And the borrow checker?")
    busy.send("Give an example too.")
    tab.input.setPlainText("Which neighbourhood is best for a first visit")
    assert spin(lambda: tab.context_meter.budget.draft_tokens, 5)
    assert "/ 2,048" in tab.context_meter.text()
    window.tabs.setCurrentIndex(0)
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        for theme in ("light", "dark"):
            theme_manager().apply(theme)
            spin(lambda: False, 0.3)
            path = SHOTS / f"history-{theme}.png"
            assert window.grab().save(str(path))
            window.tabs.setCurrentIndex(1)
            spin(lambda: False, 0.2)
            assert window.grab().save(str(SHOTS / f"history-queue-{theme}.png"))
            window.tabs.setCurrentIndex(0)
        # notices: a deleted message (Undo), a message that will not fit, a message being edited
        busy.controller.stop()
        assert spin(lambda: not busy.controller.busy, 5)
        controller.delete_message(3)
        assert tab.undo_bar.isVisible()
        tab.input.setPlainText("word " * 2100)
        assert spin(lambda: tab.overflow_bar.isVisible(), 5)
        tab.view.bubble(2).edit_button.click()
        window.sidebar.search.setText("castle")  # a hit in the older version of a reply
        window.sidebar.refresh()
        assert "castle" in window.sidebar.model.rows()[0].snippet
        for theme in ("light", "dark"):
            theme_manager().apply(theme)
            spin(lambda: False, 0.3)
            assert window.grab().save(str(SHOTS / f"history-notices-{theme}.png"))
    finally:
        theme_manager().apply("light")
        busy.controller.stop()
        spin(lambda: not busy.controller.busy, 5)
    assert controller.model.message(1).version == (2, 2)
    assert tab.context_meter.level == "full"
