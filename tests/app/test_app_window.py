"""The main window with a fake engine: tabs and shortcuts, rename and reorder, the sidebar,
export and delete, settings and the panel, models and bad folders."""

from __future__ import annotations

import json

from apphelpers import close_window, make_window, run, spin
from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence

from app.settings.chat_settings import ChatSettings
from app.store.records import MessageStatus


def _shortcut(qtbot, window, sequence: str) -> None:
    for action in window.actions():
        if any(s == QKeySequence(sequence) for s in action.shortcuts()):
            action.trigger()
            return
    raise AssertionError(f"no action for {sequence}")


def test_new_close_and_escape_shortcuts(qtbot, window, fake_engine):
    assert window.tabs.count() == 1
    _shortcut(qtbot, window, "Ctrl+T")
    _shortcut(qtbot, window, "Ctrl+T")
    assert window.tabs.count() == 3
    fake_engine.token_delay_s = 0.05
    tab = window.current_tab()
    assert tab.send("a long reply please")
    assert spin(lambda: window.menu_actions.stop.isEnabled(), 2)
    _shortcut(qtbot, window, "Esc")
    assert spin(lambda: not tab.controller.busy, 5)
    assert tab.controller.model.message(1).status is MessageStatus.STOPPED
    # closing a tab while it generates cancels the reply and keeps its text
    assert tab.send("again")
    assert spin(lambda: tab.controller.model.message(3).content, 5)
    conv_id = tab.controller.conversation.id
    _shortcut(qtbot, window, "Ctrl+W")
    assert window.tabs.count() == 2
    assert spin(lambda: window.store.messages(conv_id)[3].status is MessageStatus.STOPPED, 5)
    assert window.store.messages(conv_id)[3].content
    assert not window.store.conversation(conv_id).is_open


def test_rename_reorder_and_restore(qtbot, store, fake_bridge):
    window = make_window(store, fake_bridge)
    window.new_chat()
    window.new_chat()
    editor = window.tab_bar.edit_tab(0)
    editor.setText("Renamed chat")
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    assert window.tabs.tabText(0) == "Renamed chat"
    first_id = window.tab(0).controller.conversation.id
    assert store.conversation(first_id).title == "Renamed chat"
    window.tab_bar.moveTab(0, 2)
    assert window.tab(2).controller.conversation.id == first_id
    window.tabs.setCurrentIndex(1)
    close_window(window)
    again = make_window(store, fake_bridge)
    assert again.tabs.count() == 3
    assert again.tab(2).controller.conversation.id == first_id
    assert again.tabs.tabText(2) == "Renamed chat"
    assert again.tabs.currentIndex() == 1
    close_window(again)


def test_sidebar_search_open_export_delete(qtbot, window, store, tmp_path):
    tab = window.current_tab()
    tab.send("Tell me about otters")
    assert spin(lambda: not tab.controller.busy, 5)
    conv_id = tab.controller.conversation.id
    window.new_chat()
    window.sidebar.search.setText("otters")
    window.sidebar.refresh()
    rows = window.sidebar.model.rows()
    assert [r.id for r in rows] == [conv_id] and "otters" in rows[0].snippet
    window.close_tab(0)
    assert all(t.controller.conversation.id != conv_id for t in window.chat_tabs())
    reopened = window.open_conversation(conv_id)
    assert reopened.controller.model.rowCount() == 2
    path = window.export_conversation(conv_id, tmp_path / "otters.md")
    text = path.read_text()
    assert text.startswith("# Tell me about otters") and "## Tandem" in text
    window.delete_conversation(conv_id, confirm=False)
    assert store.conversation(conv_id) is None
    window.sidebar.search.setText("")
    window.sidebar.refresh()
    assert conv_id not in [r.id for r in window.sidebar.model.rows()]


def test_settings_apply_to_next_reply_and_show_in_panel_at_once(qtbot, window, fake_engine, store):
    form = window.settings_form
    window.show_settings()
    form.method.setCurrentIndex(form.method.findData("lookup"))
    form.draft_tokens.setValue(6)
    form.max_tokens.setValue(4)
    form.temperature.setValue(0.0)
    controller = window.current_tab().controller
    assert controller.settings.spec_method == "lookup" and controller.settings.max_tokens == 4
    assert "Prompt lookup, k=6" in window.panel.chat_spec.text()
    assert "Prompt lookup" in window.current_tab().spec_label.text()
    assert store.conversation(controller.conversation.id).settings.draft_tokens == 6
    window.current_tab().send("Hi")
    assert spin(lambda: not controller.busy, 5)
    request = fake_engine.requests[-1]
    assert request.max_tokens == 4 and request.speculative.draft_tokens == 6
    # save as default: new chats start with it
    form.saveAsDefault.emit(form.settings)
    new = window.new_chat()
    assert new.controller.settings.max_tokens == 4
    assert form.settings.max_tokens == 4  # the form follows the current tab


def test_panel_updates_while_streaming(qtbot, window, fake_engine):
    fake_engine.token_delay_s = 0.03
    window.panel.highlight.setChecked(True)
    tab = window.current_tab()
    tab.send("Stream please")
    assert spin(lambda: window.panel.chat_card.value("tokens") not in ("–", "0"), 5)
    assert spin(lambda: window.panel.engine_card.value("batch") == "1", 5)
    assert spin(lambda: not tab.controller.busy, 5)
    assert window.panel.chat_card.value("acceptance").endswith("%")
    assert window.panel.chat_positions.rates()
    reply = tab.view.bubble(1)
    assert reply.message.draft_spans
    html = reply.body.document().toHtml()
    assert "background-color" in html  # draft tokens highlighted


def test_draft_model_refused_with_reason(qtbot, window, tmp_path):
    draft = tmp_path / "tiny-draft"
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 32000}))
    form = window.settings_form
    form.set_target(window.bridge.model_info)  # the fake model has 100 tokens
    refused = []
    form.draftRefused.connect(refused.append)
    assert not form.choose_draft(str(draft))
    assert refused and "Draft model refused" in refused[0]
    assert form.draft_error.isVisible()
    assert window.current_tab().controller.settings.draft_model is None


def test_bad_model_folder_is_refused_clearly(qtbot, window, tmp_path):
    bad = tmp_path / "not-a-model"
    bad.mkdir()
    (bad / "notes.txt").write_text("hello")
    dialog = window.show_models()
    problem = dialog.add_folder(str(bad))
    assert problem and "config.json" in problem
    assert dialog.error.isVisible() and "config.json" in dialog.error.text()
    assert str(bad) not in dialog.extra_dirs()
    assert dialog.entries and dialog.entries[0].source == "default"
    dialog.close()


def test_chat_settings_persist_per_chat(qtbot, window, store):
    first = window.current_tab().controller
    first.set_settings(ChatSettings(max_tokens=7))
    second = window.new_chat().controller
    assert second.settings.max_tokens != 7
    window.tabs.setCurrentIndex(0)
    assert window.settings_form.settings.max_tokens == 7
    assert store.conversation(first.conversation.id).settings.max_tokens == 7
    assert run(window.shutdown(), 5) is None


def test_models_load_by_hand_and_a_chat_switches_model_without_touching_another(
    qtbot, window, fake_engine
):
    progress = []
    window.bridge.loadProgress.connect(
        lambda message, fraction: progress.append((message, fraction))
    )
    window.bridge.request_load("/models/other")
    assert spin(lambda: "other" in [m.name for m in window.bridge.poll_stats().models], 5)
    assert progress == [("loading", 0.5)]
    assert window.bridge.model_spec is None  # loading by hand never changes the default
    assert "fake-model" in window.status.model_label.text()
    window.bridge.request_load("/models/bad-one")
    assert spin(lambda: "Model failed to load" in window.statusBar().currentMessage(), 5)
    assert "fake-model" in window.status.model_label.text()  # the default is still there
    # one chat switches its model while another replies: the other is untouched
    fake_engine.token_delay_s = 0.03
    first = window.current_tab()
    first.send("a reply that runs while the other chat switches")
    second = window.new_chat()
    loading: list[str] = []
    second.controller.modelLoading.connect(loading.append)
    second.controller.set_settings(second.controller.settings.replace(model="/models/third"))
    assert "third" in window.tabs.tabToolTip(window.tabs.indexOf(second))
    assert "third" in second.spec_label.text()
    second.send("hi")
    assert spin(lambda: not (first.controller.busy or second.controller.busy), 10)
    assert first.controller.model.message(1).status is MessageStatus.DONE
    assert second.controller.model.message(1).status is MessageStatus.DONE
    assert fake_engine.cancelled == []  # nothing was cancelled for the switch
    assert [r.model for r in fake_engine.requests] == [None, "/models/third"]
    assert loading[0].startswith("Loading third: reading weights") and loading[-1] == ""
    assert "fake-model" in window.tabs.tabToolTip(window.tabs.indexOf(first))
