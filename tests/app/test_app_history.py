"""The chat history features in the window, with the fake engine: versions and their switcher,
deleting one message with undo, forks, the queue, Continue, the edit box's keys, the context
meter and what does not fit, the sidebar (marks, rename, delete question, search hits), export,
and the damaged-database notice."""

from __future__ import annotations

from apphelpers import close_window, make_window, spin
from fake_engine import fake_count
from PySide6.QtCore import Qt

from app.settings.chat_settings import ChatSettings
from app.sidebar.conversation_model import ConversationRoles
from app.sidebar.delete_confirmation import delete_question
from app.store.conversation_store import Store
from app.store.export import documents_dir
from app.store.records import MessageStatus

REPLY_1 = "Alfama first, then the castle."
REPLY_2 = "Belém first, then the tower."


def _reply(tab, fake_engine, prompt: str, reply: str) -> None:
    fake_engine.reply = reply
    assert tab.send(prompt)
    assert spin(lambda: not tab.controller.busy, 10)


def _texts(tab) -> list[str]:
    return [b.body.text() for b in tab.view.bubbles()]


def test_versions_switch_and_survive_a_restart(qtbot, store, fake_bridge, fake_engine):
    window = make_window(store, fake_bridge)
    tab = window.current_tab()
    _reply(tab, fake_engine, "Plan a day in Lisbon", REPLY_1)
    _reply(tab, fake_engine, "Where to eat?", "A tasca in Mouraria.")
    fake_engine.reply = REPLY_2
    assert tab.view.bubble(1).regenerate_button.isHidden()  # only the last reply offers it
    tab.view.bubble(3).regenerate_button.click()
    assert spin(lambda: not tab.controller.busy, 10)
    assert tab.view.bubble(3).versions.text() == "‹ 2/2 ›"
    fake_engine.reply = "Pastéis in Belém."
    bubble = tab.view.bubble(2)
    bubble.edit_button.click()
    bubble.editor.text_box.setPlainText("Where to eat cheaply?")
    bubble.editor.save_button.click()
    assert spin(lambda: not tab.controller.busy, 10)
    assert _texts(tab) == [
        "Plan a day in Lisbon",
        REPLY_1,
        "Where to eat cheaply?",
        "Pastéis in Belém.",
    ]
    assert tab.view.bubble(2).versions.text() == "‹ 2/2 ›"
    # back to the first question: its replies come back, with the version chosen there
    tab.view.bubble(2).versions.previous.click()
    assert _texts(tab) == ["Plan a day in Lisbon", REPLY_1, "Where to eat?", REPLY_2]
    assert tab.view.bubble(3).versions.text() == "‹ 2/2 ›"
    tab.view.bubble(3).versions.previous.click()
    assert _texts(tab)[3] == "A tasca in Mouraria."
    conv_id = tab.controller.conversation.id
    close_window(window)
    path = store.path
    store.close()

    again_store = Store(path)
    again = make_window(again_store, fake_bridge)
    restored = next(t for t in again.chat_tabs() if t.controller.conversation.id == conv_id)
    assert _texts(restored) == [
        "Plan a day in Lisbon",
        REPLY_1,
        "Where to eat?",
        "A tasca in Mouraria.",
    ]
    assert restored.view.bubble(3).versions.text() == "‹ 1/2 ›"
    restored.view.bubble(2).versions.next.click()
    assert _texts(restored)[2:] == ["Where to eat cheaply?", "Pastéis in Belém."]
    assert again_store.message_count(conv_id) == 7
    close_window(again)
    again_store.close()


def test_delete_one_message_then_undo(qtbot, window, fake_engine, store):
    tab = window.current_tab()
    _reply(tab, fake_engine, "Tell me about otters", "Otters hold hands when they sleep.")
    _reply(tab, fake_engine, "And beavers?", "Beavers build dams.")
    controller = tab.controller
    tab.view.bubble(1).delete_action.trigger()
    assert _texts(tab) == ["Tell me about otters", "And beavers?", "Beavers build dams."]
    assert tab.undo_bar.isVisible() and "Otters hold hands" in tab.undo_bar.label.text()
    assert store.list_conversations("sleep") == []
    assert [m.content for m in store.messages(controller.conversation.id)][1] == "And beavers?"
    tab.undo_bar.button.click()
    assert _texts(tab)[1] == "Otters hold hands when they sleep."
    assert store.list_conversations("sleep")
    assert not tab.undo_bar.isVisible()
    # a version that is deleted gives its place to the other version
    fake_engine.reply = "Beavers gnaw trees."
    assert controller.regenerate()
    assert spin(lambda: not controller.busy, 10)
    tab.view.bubble(3).delete_action.trigger()
    assert _texts(tab)[3] == "Beavers build dams."
    assert tab.view.bubble(3).versions.isHidden()  # one visible version left
    assert controller.undo()
    assert (
        _texts(tab)[3] == "Beavers gnaw trees." and tab.view.bubble(3).versions.text() == "‹ 2/2 ›"
    )


def test_new_chat_from_here_opens_a_fork(qtbot, window, fake_engine, store):
    tab = window.current_tab()
    _reply(tab, fake_engine, "Name a colour", "Blue.")
    _reply(tab, fake_engine, "Another", "Green.")
    count = window.tabs.count()
    tab.view.bubble(1).fork_action.trigger()
    assert window.tabs.count() == count + 1
    fork = window.current_tab()
    assert fork is not tab
    assert _texts(fork) == ["Name a colour", "Blue."]
    assert fork.controller.conversation.title.endswith("(fork)")
    assert len(tab.controller.model.messages()) == 4
    _reply(fork, fake_engine, "A warm one", "Orange.")  # the fork goes its own way
    assert fake_engine.requests[-1].messages[-1] == {"role": "user", "content": "A warm one"}
    assert len(store.messages(tab.controller.conversation.id)) == 4


def test_queued_messages_are_sent_in_order(qtbot, store, fake_bridge, fake_engine):
    window = make_window(store, fake_bridge)
    tab = window.current_tab()
    controller = tab.controller
    fake_engine.token_delay_s = 0.03
    fake_engine.reply = "one two three four five"
    for text in ("first", "second", "third", "fourth"):
        assert tab.send(text)
    queued = [b for b in tab.view.bubbles() if b.badge_text() == "queued"]
    assert [b.body.text() for b in queued] == ["second", "third", "fourth"]
    assert tab.send_button.text() == "Stop" and tab.input.toPlainText() == ""
    assert store.conversation(controller.conversation.id).queue == ["second", "third", "fourth"]
    queued[1].cancel_button.click()  # "third" leaves the queue
    assert spin(lambda: not controller.busy and not len(controller.queue), 10)
    users = [r.messages[-1]["content"] for r in fake_engine.requests]
    assert users == ["first", "second", "fourth"]
    assert [m.content for m in controller.model.messages()][::2] == ["first", "second", "fourth"]
    assert all(m.status is MessageStatus.DONE for m in controller.model.messages())
    # stop leaves the queue waiting, and it survives a restart
    fake_engine.token_delay_s = 0.2
    tab.send("fifth")
    tab.send("sixth")
    assert spin(lambda: controller.model.message(controller.model.rowCount() - 2).content, 5)
    tab.stop()
    assert spin(lambda: not controller.busy, 5)
    assert [m.content for m in controller.queue.rows()] == ["sixth"]
    conv_id = controller.conversation.id
    close_window(window)
    window = make_window(store, fake_bridge)
    tab = next(t for t in window.chat_tabs() if t.controller.conversation.id == conv_id)
    last = tab.view.bubbles()[-1]
    assert last.badge_text() == "queued" and last.send_now_button.isVisible()
    fake_engine.token_delay_s = 0.01
    last.send_now_button.click()
    assert spin(lambda: not tab.controller.busy and not len(tab.controller.queue), 10)
    assert fake_engine.requests[-1].messages[-1]["content"] == "sixth"
    close_window(window)


def test_continue_extends_a_reply_cut_at_max_tokens(qtbot, window, fake_engine, store):
    tab = window.current_tab()
    controller = tab.controller
    controller.set_settings(ChatSettings(max_tokens=4))
    fake_engine.reply = "one two three four five six seven eight nine"
    tab.send("Count to nine")
    assert spin(lambda: not controller.busy, 10)
    bubble = tab.view.bubble(1)
    assert bubble.badge_text() == "cut at max tokens" and bubble.continue_button.isVisible()
    cut = controller.model.message(1)
    assert cut.content == "one two three four "
    bubble.continue_button.click()
    assert spin(lambda: not controller.busy, 10)
    request = fake_engine.requests[-1]
    assert request.continue_reply and request.messages[-1] == {
        "role": "assistant",
        "content": "one two three four ",
    }
    reply = controller.model.message(1)
    assert reply.id == cut.id and controller.model.rowCount() == 2
    assert reply.content == "one two three four five six seven eight "
    assert store.message(reply.id).content == reply.content
    assert controller.last_stats.cached_tokens > 0
    assert tab.view.bubble(1).body.text() == reply.content


def test_edit_box_ctrl_enter_saves_and_esc_cancels(qtbot, window, fake_engine):
    tab = window.current_tab()
    _reply(tab, fake_engine, "Original question", "An answer.")
    bubble = tab.view.bubble(0)
    bubble.edit_button.click()
    assert bubble.is_editing()
    qtbot.keyClicks(bubble.editor.text_box, " changed")
    qtbot.keyClick(bubble.editor.text_box, Qt.Key.Key_Escape)
    assert not bubble.is_editing() and bubble.body.text() == "Original question"
    assert len(fake_engine.requests) == 1 and not tab.controller.busy
    bubble.edit_button.click()
    bubble.editor.text_box.setPlainText("Edited question")
    qtbot.keyClick(bubble.editor.text_box, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert spin(lambda: not tab.controller.busy, 10)
    assert tab.view.bubble(0).body.text() == "Edited question"
    assert fake_engine.requests[-1].messages[-1]["content"] == "Edited question"


def test_context_meter_and_a_message_that_does_not_fit(qtbot, window, fake_engine):
    tab = window.current_tab()
    controller = tab.controller
    _reply(tab, fake_engine, "Hello there", "Hi! How can I help?")
    stats = controller.last_stats
    meter = tab.context_meter
    assert spin(lambda: meter.budget.used is not None, 5)
    assert meter.budget.used == stats.context_tokens
    assert meter.text() == f"{stats.context_tokens} / 2,048"
    assert meter.bar.isVisibleTo(tab)  # a known limit: the bar shows the share used
    tab.input.setPlainText("A short one")
    draft = controller.request_messages() + [{"role": "user", "content": "A short one"}]
    assert spin(lambda: meter.budget.with_draft == fake_count(draft), 5)
    assert meter.text().startswith("+") and meter.level == "ok"
    # a long message fills most of the context (the fake counts a token per word)
    controller.set_settings(controller.settings.replace(max_tokens=300))
    _reply(tab, fake_engine, "word " * 1650, "Noted.")
    assert spin(lambda: meter.level == "warn", 5)
    # a message too long for what is left is held back, with an offer
    too_long = "more " * 700
    tab.input.setPlainText(too_long)
    assert spin(lambda: tab.overflow_bar.isVisible(), 5)  # said before sending
    assert meter.level == "full"
    requests = len(fake_engine.requests)
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)
    assert (
        tab.overflow_bar.isVisible() and "Too long for this chat" in tab.overflow_bar.label.text()
    )
    assert len(fake_engine.requests) == requests and tab.input.toPlainText().strip()
    tabs = window.tabs.count()
    fake_engine.reply = "Short."
    tab.overflow_bar.button.click()
    assert window.tabs.count() == tabs + 1
    new = window.current_tab()
    # beyond the quick bound (a token is at least a byte): sent once the engine has counted it
    assert spin(lambda: new.controller.model.rowCount() == 2, 5)
    assert new.controller.model.message(0).content == too_long.strip()
    assert new.controller.settings.max_tokens == 300
    assert tab.input.toPlainText() == ""
    assert spin(lambda: not new.controller.busy, 10)


def test_last_reply_stats_are_back_after_a_restart(qtbot, store, fake_bridge, fake_engine):
    window = make_window(store, fake_bridge)
    tab = window.current_tab()
    _reply(tab, fake_engine, "Stats please", "Here are some words for the stats.")
    before = tab.controller.last_stats
    shown = window.panel.chat_card.value("tokens")
    conv_id = tab.controller.conversation.id
    close_window(window)
    path = store.path
    store.close()
    again_store = Store(path)
    again = make_window(again_store, fake_bridge)
    tab = next(t for t in again.chat_tabs() if t.controller.conversation.id == conv_id)
    again.tabs.setCurrentWidget(tab)
    assert tab.controller.last_stats == before
    assert before.spec.accepted_by_position and before.context_tokens
    assert again.panel.chat_card.value("tokens") == shown != "–"
    close_window(again)
    again_store.close()


def test_sidebar_marks_rename_delete_question_and_search_hits(qtbot, window, fake_engine, store):
    first = window.current_tab()
    _reply(first, fake_engine, "Trip to Lisbon please", "Go in May; the jacarandas bloom.")
    first.controller.rename("Trip to Lisbon")
    second = window.new_chat()
    _reply(second, fake_engine, "Bread", "Knead for ten minutes.")
    sidebar = window.sidebar
    sidebar.refresh()
    assert sidebar.model.rowCount() == 2  # a new empty tab is not listed
    window.new_chat()
    sidebar.refresh()
    assert sidebar.model.rowCount() == 2
    # open and writing are told apart
    fake_engine.token_delay_s = 0.1
    second.send("More?")
    row = sidebar.model.row_of(second.controller.conversation.id)
    index = sidebar.model.index(row, 0)
    assert spin(lambda: index.data(ConversationRoles.GENERATING), 2)
    assert index.data(ConversationRoles.SUBTITLE) == "Writing a reply…"
    other = sidebar.model.index(sidebar.model.row_of(first.controller.conversation.id), 0)
    assert (
        not other.data(ConversationRoles.GENERATING)
        and other.data(ConversationRoles.SUMMARY).is_open
    )
    second.stop()
    assert spin(lambda: not index.data(ConversationRoles.GENERATING), 5)
    # rename in place, while open
    conv_id = first.controller.conversation.id
    sidebar.model.setData(other, "Lisbon in May")
    assert first.controller.conversation.title == "Lisbon in May"
    assert store.conversation(conv_id).title == "Lisbon in May"
    # the delete question names the chat and counts its messages
    assert delete_question("Lisbon in May", store.message_count(conv_id)) == (
        "Delete “Lisbon in May” and its 2 messages?"
    )
    # a search hit in an older version opens the chat on that version
    fake_engine.token_delay_s = 0.01
    fake_engine.reply = "Go in October instead."
    assert first.controller.regenerate()
    assert spin(lambda: not first.controller.busy, 10)
    sidebar.search.setText("jacarandas")
    sidebar.refresh()
    hit = sidebar.model.index(0, 0)
    assert "jacarandas" in hit.data(ConversationRoles.SUBTITLE)
    sidebar._activated(hit)
    assert window.current_tab() is first
    assert first.view.bubble(1).body.text() == "Go in May; the jacarandas bloom."


def test_export_all_and_the_export_dialog_opens_in_documents(
    qtbot, window, fake_engine, tmp_path, monkeypatch
):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    (tmp_path / "Documents").mkdir()
    tab = window.current_tab()
    _reply(tab, fake_engine, "First chat", "Answer one.")
    other = window.new_chat()
    _reply(other, fake_engine, "Second chat", "Answer two.")
    from app.store.export import export_all

    paths = export_all(window.store, tmp_path)
    assert sorted(p.name for p in paths) == ["First chat.md", "Second chat.md"]
    assert "Answer two." in (paths[0].parent / "Second chat.md").read_text()
    from app.sidebar.export_dialogs import export_chat_dialog

    dialog = export_chat_dialog(window, window.store, tab.controller.conversation.id, print)
    assert dialog.directory().absolutePath() == str(documents_dir())
    dialog.reject()


def test_a_damaged_database_is_reported_at_start(qtbot, data_dir, fake_bridge):
    data_dir.mkdir(parents=True)
    path = data_dir / "tandem.sqlite3"
    path.write_bytes(b"garbage" * 1000)
    store = Store(path)
    window = make_window(store, fake_bridge)
    assert str(store.damaged.damaged_path) in window.statusBar().currentMessage()
    close_window(window)
    store.close()
