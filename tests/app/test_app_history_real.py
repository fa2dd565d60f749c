"""The history features with the real default model: versions across a restart, Continue as a
prompt-cache hit, search over real replies, the queue, and exact context counts."""

from __future__ import annotations

import pytest
from apphelpers import close_window, make_window, run, spin

from app.settings.chat_settings import ChatSettings
from app.store.conversation_store import Store
from app.store.records import MessageStatus, Role

pytestmark = pytest.mark.slow

REPLY_TIMEOUT_S = 180.0
GREEDY = ChatSettings(max_tokens=16, temperature=0.0)


def _done(tab) -> bool:
    return spin(lambda: not tab.controller.busy, REPLY_TIMEOUT_S)


def _texts(tab) -> list[str]:
    return [b.body.text() for b in tab.view.bubbles()]


def test_edit_and_regenerate_keep_branches_across_a_restart(qtbot, store, real_bridge):
    window = make_window(store, real_bridge)
    tab = window.current_tab()
    controller = tab.controller
    controller.set_settings(ChatSettings(max_tokens=12, temperature=1.0, seed=1))
    assert tab.send("Name a fruit.")
    assert _done(tab)
    first = controller.model.message(1)
    controller.set_settings(controller.settings.replace(seed=2))
    assert controller.regenerate()
    assert _done(tab)
    second = controller.model.message(1)
    assert second.id != first.id and second.version == (2, 2)
    assert first.content != second.content, "two seeds gave the same reply"
    controller.set_settings(GREEDY)
    assert controller.edit(0, "Name a vegetable.")
    assert _done(tab)
    edited = controller.model.messages()
    assert edited[0].content == "Name a vegetable." and edited[0].version == (2, 2)
    assert edited[1].status is MessageStatus.DONE and edited[1].content
    conv_id = controller.conversation.id
    close_window(window)
    path = store.path
    store.close()

    again_store = Store(path)
    window = make_window(again_store, real_bridge)
    tab = next(t for t in window.chat_tabs() if t.controller.conversation.id == conv_id)
    assert _texts(tab) == [m.content for m in edited]
    tab.view.bubble(0).versions.previous.click()  # the first question, with its last reply
    assert _texts(tab) == ["Name a fruit.", second.content]
    tab.view.bubble(1).versions.previous.click()
    assert _texts(tab) == ["Name a fruit.", first.content]
    assert tab.view.bubble(1).versions.text() == "‹ 1/2 ›"
    assert again_store.message_count(conv_id) == 5  # nothing was deleted
    # the chat goes on from the version on screen
    tab.controller.set_settings(GREEDY)
    assert tab.send("Another one?")
    assert _done(tab)
    sent = tab.controller.model.messages()
    assert [m.role for m in sent] == [Role.USER, Role.ASSISTANT] * 2
    close_window(window)
    again_store.close()


def test_continue_extends_a_cut_reply_from_the_prompt_cache(qtbot, real_window):
    tab = real_window.current_tab()
    controller = tab.controller
    controller.set_settings(ChatSettings(max_tokens=8, temperature=0.0))
    assert tab.send("Count from one to twenty in words, separated by commas.")
    assert _done(tab)
    cut = controller.model.message(1)
    assert cut.stats["finish_reason"] == "length" and cut.cut_at_max_tokens
    bubble = tab.view.bubble(1)
    assert bubble.badge_text() == "cut at max tokens" and not bubble.continue_button.isHidden()
    bubble.continue_button.click()
    assert controller.busy
    assert _done(tab)
    reply = controller.model.message(1)
    assert reply.id == cut.id and controller.model.rowCount() == 2
    assert reply.content.startswith(cut.content) and len(reply.content) > len(cut.content)
    assert reply.status is MessageStatus.DONE
    stats = controller.last_stats
    assert stats.cached_tokens > 0, "the continuation did not start from the prompt cache"
    assert stats.context_tokens >= stats.prompt_tokens + stats.generated_tokens - 1
    print(f"\ncut: {cut.content!r}\ncontinued: {reply.content!r}, cached {stats.cached_tokens}")


def test_search_finds_words_in_real_replies(qtbot, real_window, store):
    tab = real_window.current_tab()
    tab.controller.set_settings(GREEDY.replace(max_tokens=20))
    assert tab.send("What is the capital of France?")
    assert _done(tab)
    reply = tab.controller.model.message(1).content
    assert "Paris" in reply
    hits = store.list_conversations("paris")
    assert [h.id for h in hits] == [tab.controller.conversation.id]
    snippet, marks = hits[0].snippet, hits[0].snippet_marks
    assert "Paris" in [snippet[s:e] for s, e in marks]


def test_queued_messages_are_sent_in_order(qtbot, real_window):
    tab = real_window.current_tab()
    controller = tab.controller
    controller.set_settings(GREEDY.replace(max_tokens=6))
    prompts = ["Say one.", "Say two.", "Say three."]
    for prompt in prompts:
        assert tab.send(prompt)
    assert [m.status for m in controller.model.messages()][2:] == [MessageStatus.QUEUED] * 2
    assert spin(lambda: not controller.busy and not len(controller.queue), 3 * REPLY_TIMEOUT_S)
    messages = controller.model.messages()
    assert [m.content for m in messages[::2]] == prompts
    assert all(m.status is MessageStatus.DONE and m.content for m in messages[1::2])
    assert [m.parent_id for m in messages[1:]] == [m.id for m in messages[:-1]]


def test_context_use_is_counted_exactly(qtbot, real_window):
    tab = real_window.current_tab()
    controller = tab.controller
    controller.set_settings(GREEDY.replace(max_tokens=8))
    assert tab.send("Hello!")
    assert _done(tab)
    stats = controller.last_stats
    budget = controller.budget
    assert budget.used == stats.context_tokens > stats.prompt_tokens
    assert budget.limit == real_window.bridge.model_info.context_length
    counted = run(real_window.bridge.engine.count_tokens(controller.request_messages()))
    # counted as the next prompt: the end of this turn and the start of the next one more
    assert 0 <= counted - stats.context_tokens <= 8
    tab.input.setPlainText("And how are you today?")
    assert spin(lambda: budget.draft_tokens, 10)
    assert budget.draft_tokens > 3 and tab.context_meter.text().startswith("+")
