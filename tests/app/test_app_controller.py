"""ChatController with a fake engine: streaming, persistence before display, stop, regenerate,
edit, errors."""

from __future__ import annotations

import pytest
from apphelpers import spin

from app.chat.chat_controller import ChatController
from app.settings.chat_settings import ChatSettings
from app.store.records import Conversation, MessageStatus, Role


@pytest.fixture
def controller(store, fake_bridge):
    conv = store.create_conversation(Conversation(settings=ChatSettings(max_tokens=50)))
    c = ChatController(conv, store=store, bridge=fake_bridge)
    yield c
    c.stop()
    spin(lambda: not c.busy, 5)


def test_send_streams_and_stores_before_showing(controller, store, fake_engine):
    shown_vs_stored = []

    def changed(top, _bottom, _roles=()):
        message = controller.model.message(top.row())
        if message.role is Role.ASSISTANT:
            stored = store.message(message.id)
            shown_vs_stored.append((message.content, stored.content))

    controller.model.dataChanged.connect(changed)
    assert controller.send("Say hello")
    assert controller.busy
    assert spin(lambda: not controller.busy, 10)
    reply = controller.model.message(1)
    assert reply.status is MessageStatus.DONE
    assert reply.content == fake_engine.reply
    assert len(shown_vs_stored) >= 2
    for shown, stored in shown_vs_stored:
        assert stored.startswith(shown)  # nothing on screen is missing from SQLite
    assert store.message(reply.id).status is MessageStatus.DONE
    assert reply.draft_spans and reply.stats["generated_tokens"] > 0
    assert controller.conversation.title == "Say hello"
    request = fake_engine.requests[-1]
    assert request.messages == [{"role": "user", "content": "Say hello"}]
    assert request.max_tokens == 50


def test_system_prompt_and_settings_reach_the_request(controller, fake_engine):
    controller.set_system_prompt("Answer in French")
    controller.set_settings(
        ChatSettings(max_tokens=3, temperature=0.0, spec_method="lookup", draft_tokens=5)
    )
    controller.send("Hi")
    assert spin(lambda: not controller.busy, 10)
    request = fake_engine.requests[-1]
    assert request.messages[0] == {"role": "system", "content": "Answer in French"}
    assert request.max_tokens == 3 and request.sampling.temperature == 0.0
    assert request.speculative.method.value == "lookup" and request.speculative.draft_tokens == 5
    assert controller.model.message(1).stats["finish_reason"] == "length"


def test_stop_keeps_the_text_so_far(controller, store, fake_engine):
    fake_engine.token_delay_s = 0.05
    controller.send("Go")
    assert spin(lambda: len(controller.model.message(1).content) > 5, 10)
    controller.stop()
    assert spin(lambda: not controller.busy, 5)
    reply = controller.model.message(1)
    assert reply.status is MessageStatus.STOPPED
    assert 0 < len(reply.content) < len(fake_engine.reply)
    assert store.message(reply.id).content == reply.content
    assert store.message(reply.id).status is MessageStatus.STOPPED


def test_regenerate_and_edit_add_versions_and_keep_the_old_ones(controller, store, fake_engine):
    controller.send("First question")
    assert spin(lambda: not controller.busy, 10)
    first_id = controller.model.message(1).id
    fake_engine.reply = "Second answer."
    assert controller.regenerate()
    assert spin(lambda: not controller.busy, 10)
    assert controller.model.rowCount() == 2
    assert controller.model.message(1).content == "Second answer."
    assert controller.model.message(1).version == (2, 2)
    assert store.message(first_id).status is MessageStatus.DONE  # kept, as version 1
    fake_engine.reply = "Edited answer."
    assert controller.edit(0, "Edited question")
    assert spin(lambda: not controller.busy, 10)
    assert [m.content for m in controller.model.messages()] == ["Edited question", "Edited answer."]
    assert [m.content for m in store.messages(controller.conversation.id)] == [
        "Edited question",
        "Edited answer.",
    ]
    assert controller.model.message(0).version == (2, 2)
    assert fake_engine.requests[-1].messages == [{"role": "user", "content": "Edited question"}]
    # an earlier user message in a longer chat: a new branch from there
    controller.send("Follow-up")
    assert spin(lambda: not controller.busy, 10)
    assert controller.model.rowCount() == 4
    assert controller.edit(0, "Start over")
    assert spin(lambda: not controller.busy, 10)
    assert controller.model.rowCount() == 2
    assert controller.model.message(0).version == (3, 3)
    assert store.message_count(controller.conversation.id) == 9  # nothing was deleted


def test_busy_queues_new_messages_and_refuses_history_changes(controller, fake_engine):
    fake_engine.token_delay_s = 0.05
    controller.send("One")
    assert controller.send("Two")  # queued
    assert controller.model.message(2).status is MessageStatus.QUEUED
    assert not controller.regenerate()
    assert not controller.edit(0, "x")
    assert not controller.delete_message(0)
    controller.stop()
    assert spin(lambda: not controller.busy, 5)
    assert len(controller.queue) == 1  # a stop leaves the queue waiting


def test_engine_error_is_shown_on_the_message(controller, fake_engine):
    errors = []
    controller.errorOccurred.connect(errors.append)
    fake_engine.fail_with = "prompt too long"
    controller.send("Hi")
    assert spin(lambda: not controller.busy, 5)
    reply = controller.model.message(1)
    assert reply.status is MessageStatus.ERROR and reply.error == "prompt too long"
    assert errors == ["prompt too long"]


def test_close_cancels_and_stores(controller, store, fake_engine):
    fake_engine.token_delay_s = 0.05
    closed = []
    controller.closed.connect(lambda: closed.append(1))
    controller.send("Go")
    assert spin(lambda: controller.model.message(1).content, 5)
    controller.close()
    assert spin(lambda: closed, 5)
    stored = store.messages(controller.conversation.id)[1]
    assert stored.status is MessageStatus.STOPPED and stored.content
