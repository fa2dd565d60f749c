"""The live panel with a fake engine: the losing-speculation notice and its switch, the engine's
last minute / since start figures, the prompt cache's size and "Clear prompt cache", and the
engine-stopped banner with its Restart button. Saves screenshots of the notice."""

from __future__ import annotations

from apphelpers import ARTIFACTS, close_window, make_window, spin
from PySide6.QtWidgets import QApplication, QMessageBox

from app.panel.metric_tips import METRIC_TIPS
from app.panel.speculation_verdict import judge
from app.theme import theme_manager
from engine.requests import RequestStats, SpecStats

SHOTS = ARTIFACTS / "screenshots"
LONG_REPLY = (
    "Here is the function, with the loop written out so that each step is clear:\n\n"
    "```python\ndef reverse(text: str) -> str:\n    # walk backwards, one character at a time\n"
    '    out = ""\n    for ch in text:\n        out = ch + out\n    return out\n```\n\n'
    "Slicing (`text[::-1]`) does the same in one step and is what most code uses.\n"
)


def _reply(window, text: str = "Reverse a string in Python"):
    tab = window.current_tab()
    assert tab.send(text)
    assert spin(lambda: not tab.controller.busy, 10)
    return tab.controller


def test_losing_speculation_is_said_in_words_with_a_switch(qtbot, window, fake_engine):
    fake_engine.reply = LONG_REPLY
    fake_engine.plain_tokens_per_s = 200.0  # the fake decodes at 50 + n tokens/s
    controller = window.current_tab().controller
    controller.set_settings(controller.settings.replace(spec_method="lookup"))
    _reply(window)
    card = window.panel.chat_card
    assert card.notice.isVisibleTo(window.panel)
    assert "slowing this chat down" in card.notice.text.text()
    assert "an estimated 200.0 tok/s without it" in card.notice.text.text()
    assert card.value("plain") == "200.0 tok/s"
    shown = [b.text() for b in card.notice.buttons() if b.isVisibleTo(card.notice)]
    assert shown == ["Switch to Auto", "Turn off"]
    _screenshots(window, "losing-speculation")
    # the switch changes this chat's method, and the notice goes (the figures were lookup's)
    next(b for b in card.notice.buttons() if b.text() == "Switch to Auto").click()
    assert controller.settings.spec_method == "auto"
    assert window.settings_form.method.currentData() == "auto"
    assert "Auto" in window.statusBar().currentMessage()
    assert not card.notice.isVisibleTo(window.panel)
    # auto losing too: only "Turn off" is offered
    _reply(window, "Again please")
    assert card.notice.isVisibleTo(window.panel)
    assert [b.text() for b in card.notice.buttons() if b.isVisibleTo(card.notice)] == ["Turn off"]


def test_low_recent_acceptance_and_the_engine_note_are_shown(qtbot, window, fake_engine):
    fake_engine.reply = LONG_REPLY
    fake_engine.recent_acceptance = 0.12
    controller = window.current_tab().controller
    controller.set_settings(controller.settings.replace(spec_method="draft"))
    _reply(window)
    card = window.panel.chat_card
    assert "12% of recent drafts accepted" in card.notice.text.text()
    assert card.value("recent") == "12%"
    fake_engine.speculation_note = "this model's cache cannot be rolled back"
    _reply(window, "And once more")
    text = card.notice.text.text()
    assert text == "Running without speculation: this model's cache cannot be rolled back"
    assert not [b for b in card.notice.buttons() if b.isVisibleTo(card.notice)]


def test_verdict_needs_speculation_and_enough_evidence():
    spec = SpecStats(rounds=20, draft_tokens=80, accepted_tokens=8)
    slow = RequestStats(generated_tokens=40, decode_tokens_per_s=10.0, spec=spec)
    slow.plain_tokens_per_s, slow.recent_acceptance, slow.speculation_note = 14.0, 0.6, None
    assert judge(slow, "off") is None  # nothing to lose without speculation
    assert judge(slow, "lookup").suggestions == ("auto", "off")
    slow.plain_tokens_per_s = 10.2  # within the margin: not called losing
    assert judge(slow, "lookup") is None
    early = RequestStats(generated_tokens=3, decode_tokens_per_s=1.0, spec=SpecStats(rounds=2))
    early.plain_tokens_per_s, early.recent_acceptance, early.speculation_note = 14.0, 0.0, None
    assert judge(early, "lookup") is None  # too early to tell


def test_engine_figures_say_last_minute_or_since_start(qtbot, window, fake_engine, store):
    card = window.panel.engine_card
    assert card.scope.current == "recent"
    _reply(window)
    window.bridge.poll_stats()
    assert card.scope_caption.text() == "Speculation over the last minute, all chats together."
    assert card.value("acceptance").endswith("%")
    fake_engine._stats.spec_recent = SpecStats()  # the minute passed: nothing recent
    window.bridge.poll_stats()
    assert card.value("acceptance") == "–"
    saved = card.value("saved")
    card.scope.button("total").click()
    assert store.setting("panel_engine_scope") == "total"
    assert card.scope_caption.text().startswith("Speculation since the engine started")
    assert card.value("acceptance").endswith("%")
    assert card.value("saved") == saved  # forwards saved is always since start
    again = make_window(store, window.bridge)
    assert again.panel.engine_card.scope.current == "total"
    close_window(again)


def test_clear_prompt_cache_confirms_then_shows_bytes_freed(qtbot, window, fake_engine):
    window.bridge.poll_stats()
    cache = window.panel.cache_card
    assert cache.value("disk").startswith("3.3 MB")
    cache.clear_button.click()
    box = window.cache_clearer.box
    assert box is not None and box.isVisible() and "3.3 MB on disk" in box.informativeText()
    box.button(QMessageBox.StandardButton.Cancel).click()
    assert fake_engine.stats().cache.disk_bytes == 3_500_000  # cancelled: nothing cleared
    cache.clear_button.click()
    box = window.cache_clearer.box
    next(b for b in box.buttons() if b.text() == "Clear").click()
    assert spin(lambda: "freed" in cache.result.text(), 5)
    assert cache.result.text() == "Prompt cache cleared: 3.3 MB freed"
    assert cache.value("disk").startswith("0 B")
    # the Models window shows the size on disk and clears it the same way
    dialog = window.show_models()
    assert "0 B" in dialog.cache_label.text()
    fake_engine._stats.cache.disk_bytes = 2048
    window.bridge.poll_stats()
    assert "2 KB" in dialog.cache_label.text()
    dialog.clear_cache_button.click()
    box = window.cache_clearer.box
    assert box.parent() is dialog
    next(b for b in box.buttons() if b.text() == "Clear").click()
    assert spin(lambda: dialog.cache_result.text() == "Cleared: 2 KB freed", 5)
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert dialog.grab().save(str(SHOTS / "models-light.png"))
    dialog.close()


def test_engine_death_is_explained_and_restart_starts_it_again(qtbot, window, fake_engine):
    fake_engine.token_delay_s = 0.05
    tab = window.current_tab()
    assert tab.send("a reply the engine will not finish")
    assert spin(lambda: tab.controller.model.message(1).content, 5)
    fake_engine.die("the MLX thread died: out of memory")
    assert spin(lambda: not tab.controller.busy, 5)
    banner = window.engine_banner
    assert banner.isVisible()
    assert banner.title.text() == "The engine stopped"
    assert "out of memory" in banner.text.text()
    assert tab.controller.model.message(1).status.value == "error"
    assert window.status.model_label.text() == "Engine stopped"
    _screenshots(window, "engine-stopped", panel_only=False)
    window.restart_button.click()
    assert spin(lambda: not banner.isVisible(), 5)
    assert "fake-model" in window.status.model_label.text()
    assert fake_engine.starts == 2 and fake_engine.running
    assert tab.send("after the restart")
    assert spin(lambda: not tab.controller.busy, 10)
    assert tab.controller.model.message(3).status.value == "done"


def _screenshots(window, name: str, *, panel_only: bool = True) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    window.panel_dock.show()
    window.panel_dock.raise_()
    try:
        for theme in ("light", "dark"):
            theme_manager().apply(theme)
            spin(lambda: False, 0.15)
            QApplication.processEvents()
            target = window.panel if panel_only else window
            assert target.grab().save(str(SHOTS / f"{name}-{theme}.png"))
            if panel_only:
                assert window.grab().save(str(SHOTS / f"{name}-window-{theme}.png"))
    finally:
        theme_manager().apply("light")


def test_this_chat_shows_the_chats_last_reply_figures(qtbot, window, fake_engine):
    first = _reply(window)
    window.new_chat()
    card = window.panel.chat_card
    assert card.value("tokens") == "–"  # the new chat has no reply yet
    window.tabs.setCurrentIndex(0)
    assert card.value("tokens") == str(first.last_stats.generated_tokens)
    assert card.value("tpf") == f"{first.last_stats.spec.tokens_per_forward:.2f}"
    spec = first.last_stats.spec
    assert card.value("ahead") == f"{round(100 * spec.ahead_rounds / spec.rounds)}%"
    assert card.value("guessed") == "0%"
    by = first.last_stats.spec.rounds_by_drafter
    share = round(100 * by["lookup"] / sum(by.values()))
    assert card.value("drafters") == f"Prompt lookup {share}% · Draft head {100 - share}%"


def test_a_model_without_prompt_cache_says_so_instead_of_a_miss(qtbot, window, fake_engine):
    card = window.panel.chat_card
    _reply(window)
    assert card.value("cached").startswith("0 / ")
    assert card.tip("cached") == METRIC_TIPS["cached"]
    fake_engine.prompt_cache_note = "plamo3 does not use the prompt cache: chunking past its window"
    _reply(window, "And again")
    assert card.value("cached") == "off"
    tip = f"Off for this model: {fake_engine.prompt_cache_note}"
    assert card.tip("cached") == tip
    _screenshots(window, "prompt-cache-off")
    fake_engine.prompt_cache_note = None
    _reply(window, "Once more")
    assert card.value("cached") != "off"
    assert card.tip("cached") == METRIC_TIPS["cached"]


def test_this_chat_shows_the_last_reply_again_after_a_restart(qtbot, store, fake_bridge):
    window = make_window(store, fake_bridge)
    tokens = str(_reply(window).last_stats.generated_tokens)
    close_window(window)
    again = make_window(store, fake_bridge)
    assert again.panel.chat_card.value("tokens") == tokens
    close_window(again)


def test_the_chat_card_names_the_model_once_it_has_loaded(qtbot, window, monkeypatch):
    """A chat opened while the default model loads showed "the default model" in the panel
    until another chat was chosen (seen in the `make run` screenshot); the load renames it."""
    bridge, card = window.bridge, window.panel.chat_card
    info = bridge.model_info
    monkeypatch.setattr(bridge, "name_for", lambda spec: "the default model")
    card.refresh_model()
    assert "Model: the default model" in card.spec.text()
    monkeypatch.undo()  # loaded: the bridge knows its name
    bridge.modelLoaded.emit(info)
    assert f"Model: {info.name}" in card.spec.text()
    monkeypatch.setattr(bridge, "name_for", lambda spec: "another name")
    bridge.modelAdded.emit(info)  # a model loaded for some chat may rename this one's too
    assert "Model: another name" in card.spec.text()
