"""The chat settings dock: a one-line description per speculative method (also as tooltips),
fields the method does not use look disabled in both themes, and the default system prompt
that new chats start with."""

from __future__ import annotations

import dataclasses

from apphelpers import ARTIFACTS, spin
from PySide6.QtCore import Qt

from app.settings.chat_settings import SPEC_METHOD_DESCRIPTIONS, describe_drafters
from app.theme import theme_manager
from engine.engine_reports import ModelInfo

SHOTS = ARTIFACTS / "screenshots"


def _pick(form, method: str) -> None:
    form.method.setCurrentIndex(form.method.findData(method))


def test_each_method_says_when_it_helps(qtbot, window):
    form = window.settings_form
    assert set(SPEC_METHOD_DESCRIPTIONS) == {"off", "lookup", "draft", "auto", "mtp"}
    for index in range(form.method.count()):
        method = form.method.itemData(index)
        tip = form.method.itemData(index, Qt.ItemDataRole.ToolTipRole)
        if method == "mtp":  # the default model has no MTP layers: greyed, with the reason
            assert not form.method.model().item(index).isEnabled()
            assert tip.startswith("Not available: ") and "MTP" in tip
            continue
        assert form.method.model().item(index).isEnabled()
        assert tip == SPEC_METHOD_DESCRIPTIONS[method]
        assert "helps when" in tip or "best when" in tip
        assert len(tip) < 160 and "\n" not in tip  # one line
        _pick(form, method)
        assert form.method_help.text() == tip and form.method.toolTip() == tip
    _pick(form, "lookup")
    assert "repeats" in form.method_help.text()


def _info(**changes) -> ModelInfo:
    base = ModelInfo("m", "/m", "qwen3_5", 1, 1, 1024, None, "float32")
    return dataclasses.replace(base, **changes)


def test_methods_a_model_cannot_run_are_greyed_with_the_reason(qtbot, window):
    form = window.settings_form
    window.show_settings()
    methods = [form.method.itemData(i) for i in range(form.method.count())]

    def enabled() -> dict[str, bool]:
        return {m: form.method.model().item(i).isEnabled() for i, m in enumerate(methods)}

    def tip(method: str) -> str:
        return form.method.itemData(methods.index(method), Qt.ItemDataRole.ToolTipRole)

    form.set_target(_info(mtp=True))
    assert all(enabled().values())
    assert tip("mtp") == SPEC_METHOD_DESCRIPTIONS["mtp"]
    _pick(form, "mtp")
    assert form.draft_tokens.isEnabled()  # MTP drafts a fixed k
    form.set_target(_info(mtp=False))
    assert not enabled()["mtp"] and enabled()["lookup"]
    assert "no MTP layers" in tip("mtp")
    assert "no MTP layers" in form.method_help.text()  # the chat still asks for it: say why
    note = "m cannot speculate: its recurrent layers take padding into their state"
    form.set_target(_info(mtp=True, speculation_note=note))
    assert enabled() == {m: m == "off" for m in methods}
    assert all(tip(m) == f"Not available: {note}" for m in methods if m != "off")
    _pick(form, "off")
    form.method.showPopup()
    spin(lambda: False, 0.2)
    view = form.method.view()
    SHOTS.mkdir(parents=True, exist_ok=True)
    form.set_target(_info(mtp=False))
    spin(lambda: False, 0.1)
    view.window().grab().save(str(SHOTS / "settings_method_picker.png"))
    form.method.hidePopup()
    _pick(form, "mtp")  # a chat that asked for MTP before its model changed
    spin(lambda: False, 0.1)
    form.grab().save(str(SHOTS / "settings_mtp_unavailable.png"))


def _background(widget) -> str:
    image = widget.grab().toImage()
    return image.pixelColor(image.width() // 2, 3).name()


def _darkest(widget, *, dark: bool) -> str:
    image = widget.grab().toImage()
    colours = [image.pixelColor(x, y) for x in range(image.width()) for y in range(image.height())]
    key = (lambda c: -c.lightness()) if dark else (lambda c: c.lightness())
    return min(colours, key=key).name()


def test_unused_fields_look_disabled_in_both_themes(qtbot, window):
    form = window.settings_form
    window.show_settings()
    _pick(form, "off")
    assert not form.draft_tokens.isEnabled() and not form.draft_model.isEnabled()
    assert not form._spec_form.labelForField(form.draft_tokens).isEnabled()
    assert form.temperature.isEnabled()
    try:
        for theme_name in ("light", "dark"):
            theme = theme_manager().apply(theme_name)
            spin(lambda: False, 0.1)
            assert _background(form.draft_tokens) == theme.hex("disabled_bg")
            assert _background(form.temperature) == theme.hex("surface")
            dark = theme.dark
            label = form._spec_form.labelForField(form.draft_tokens)
            enabled_label = form._forms[1].labelForField(form.temperature)
            assert _darkest(label, dark=dark) != _darkest(enabled_label, dark=dark)
            SHOTS.mkdir(parents=True, exist_ok=True)
            assert form.grab().save(str(SHOTS / f"settings-{theme_name}.png"))
    finally:
        theme_manager().apply("light")
    _pick(form, "auto")  # auto picks k itself; it may use a draft model and n-grams
    assert not form.draft_tokens.isEnabled()
    assert form.draft_model.isEnabled() and form.ngram_min.isEnabled()
    _pick(form, "lookup")
    assert form.draft_tokens.isEnabled() and not form.draft_model.isEnabled()


def test_new_chats_start_with_the_default_system_prompt(qtbot, window, store):
    form = window.settings_form
    form.default_system_prompt.setPlainText("You are a careful assistant.")
    assert spin(lambda: store.setting("default_system_prompt") == "You are a careful assistant.", 2)
    tab = window.new_chat()
    assert tab.controller.conversation.system_prompt == "You are a careful assistant."
    assert tab.system_prompt.text() == "You are a careful assistant."
    assert (
        store.conversation(tab.controller.conversation.id).system_prompt == tab.system_prompt.text()
    )
    first = window.tab(0).controller
    assert first.conversation.system_prompt == ""  # chats that exist keep theirs
    # it is an app-wide default: a new window shows it in the form
    from apphelpers import close_window, make_window

    again = make_window(store, window.bridge)
    assert again.settings_form.default_system_prompt.toPlainText() == "You are a careful assistant."
    close_window(again)


def test_draft_method_names_the_models_own_draft_head(qtbot, window):
    from app.settings.draft_model_row import NO_DRAFT_TEXT

    form = window.settings_form
    window.show_settings()
    form.set_target(_info(draft_head="trained draft head (EAGLE)"))
    _pick(form, "draft")
    spin(lambda: False, 0.1)
    assert form.draft_model.itemText(0) == "Own head"
    tip = form.draft_model.itemData(0, Qt.ItemDataRole.ToolTipRole)
    assert tip == "No draft model: this model's own trained draft head (EAGLE) drafts"
    assert "own trained draft head (EAGLE) guesses ahead" in form.method_help.text()
    SHOTS.mkdir(parents=True, exist_ok=True)
    form.grab().save(str(SHOTS / "settings_draft_head.png"))
    form.set_target(_info())
    assert form.draft_model.itemText(0) == NO_DRAFT_TEXT
    assert "draft head" not in form.method_help.text()
    _pick(form, "off")


def test_who_drafted_a_reply_is_said_as_shares_the_most_first():
    assert describe_drafters({}) == "–"
    assert describe_drafters({"lookup": 5}) == "Prompt lookup"
    assert describe_drafters({"head": 1, "lookup": 3}) == "Prompt lookup 75% · Draft head 25%"
    assert describe_drafters({"mtp": 2, "draft": 2, "synthetic": 0}) == "MTP 50% · Draft model 50%"
