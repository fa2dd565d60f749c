"""The app with the real default model (SmolLM2-135M-Instruct): three tabs at once, settings,
persistence across a restart, a bad model folder. Short replies keep it quick."""

from __future__ import annotations

import pytest
from apphelpers import close_window, make_window, run, spin

from app.settings.chat_settings import ChatSettings
from app.store.conversation_store import Store
from app.store.records import MessageStatus, Role
from engine.models import ModelLoadError

pytestmark = pytest.mark.slow

REPLY_TIMEOUT_S = 180.0
GREEDY = ChatSettings(max_tokens=24, temperature=0.0)


def _lengths(tab) -> list[int]:
    """Record the reply length each time the view's model changes (what is being shown)."""
    seen: list[int] = []

    def changed(top, _bottom, _roles=()):
        message = tab.controller.model.message(top.row())
        if message.role is Role.ASSISTANT:
            seen.append(len(message.content))

    tab.controller.model.dataChanged.connect(changed)
    return seen


def _done(tabs) -> bool:
    return all(not t.controller.busy for t in tabs)


def test_three_tabs_send_stream_stop_regenerate_edit(qtbot, real_window, store):
    w = real_window
    tabs = [w.current_tab(), w.new_chat(), w.new_chat()]
    for tab in tabs:
        tab.controller.set_settings(GREEDY)
    tabs[1].controller.set_settings(GREEDY.replace(max_tokens=200))
    seen = [_lengths(tab) for tab in tabs]
    prompts = [
        "What is the capital of France?",
        "Write a long poem about the sea.",
        "Name three fruits.",
    ]
    batch_sizes: list[int] = []
    w.bridge.statsUpdated.connect(lambda s: batch_sizes.append(s.batch_size))
    for tab, prompt in zip(tabs, prompts):
        assert tab.send(prompt)
    assert all(t.controller.busy for t in tabs)

    # stop the long one once it has shown some text
    assert spin(lambda: len(tabs[1].controller.model.message(1).content) >= 12, REPLY_TIMEOUT_S)
    tabs[1].stop()
    assert spin(lambda: _done(tabs), REPLY_TIMEOUT_S)
    assert max(batch_sizes) >= 2, "the three tabs never generated together"
    stopped = tabs[1].controller.model.message(1)
    assert stopped.status is MessageStatus.STOPPED and len(stopped.content) >= 12
    assert stopped.stats is None or stopped.stats["generated_tokens"] < 200
    for tab, lengths in zip(tabs, seen):
        reply = tab.controller.model.message(1)
        assert reply.content.strip(), f"empty reply in {tab.controller.conversation.title}"
        assert len(set(lengths)) >= 3, "the reply did not stream"  # several partial lengths
        assert lengths == sorted(lengths)
        stored = store.messages(tab.controller.conversation.id)
        assert [m.content for m in stored] == [m.content for m in tab.controller.model.messages()]
    assert tabs[0].controller.model.message(1).status is MessageStatus.DONE
    assert "Paris" in tabs[0].controller.model.message(1).content

    # regenerate, edit and continue after the stop: three at once again
    old_reply = tabs[0].controller.model.message(1).id
    assert tabs[0].controller.regenerate()
    assert tabs[2].controller.edit(0, "Name three animals.")
    assert tabs[1].send("Now a short one about the moon.")
    assert spin(lambda: _done(tabs), REPLY_TIMEOUT_S)
    regenerated = tabs[0].controller.model.message(1)
    assert tabs[0].controller.model.rowCount() == 2 and regenerated.id != old_reply
    assert regenerated.status is MessageStatus.DONE and regenerated.content
    edited = tabs[2].controller.model.messages()
    assert [m.role for m in edited] == [Role.USER, Role.ASSISTANT]
    assert edited[0].content == "Name three animals." and edited[1].content
    assert tabs[1].controller.model.rowCount() == 4
    assert tabs[1].controller.model.message(1).status is MessageStatus.STOPPED
    assert tabs[1].controller.model.message(3).status is MessageStatus.DONE


def test_settings_are_applied(qtbot, real_window):
    tab = real_window.current_tab()
    controller = tab.controller
    controller.set_settings(ChatSettings(max_tokens=5, temperature=0.0))
    tab.send("Count from one to one hundred, one number per line.")
    assert spin(lambda: not controller.busy, REPLY_TIMEOUT_S)
    reply = controller.model.message(1)
    assert reply.stats["generated_tokens"] == 5 and reply.stats["finish_reason"] == "length"
    # a change shows in the panel at once and applies to the next reply
    real_window.settings_form.set_settings(controller.settings)
    form = real_window.settings_form
    form.method.setCurrentIndex(form.method.findData("lookup"))
    form.draft_tokens.setValue(3)
    form.max_tokens.setValue(12)
    assert "Prompt lookup, k=3" in real_window.panel.chat_spec.text()
    assert controller.settings.max_tokens == 12
    tab.send("Repeat exactly: the cat sat on the mat. the cat sat on the mat.")
    assert spin(lambda: not controller.busy, REPLY_TIMEOUT_S)
    reply = controller.model.message(3)
    assert reply.status is MessageStatus.DONE, reply.error
    assert reply.stats["generated_tokens"] <= 12


def test_persistence_across_restart(qtbot, store, real_bridge):
    window = make_window(store, real_bridge)
    tab = window.current_tab()
    tab.controller.set_settings(GREEDY.replace(max_tokens=16))
    tab.controller.set_system_prompt("You are terse.")
    tab.send("What is two plus two?")
    assert spin(lambda: not tab.controller.busy, REPLY_TIMEOUT_S)
    conv_id = tab.controller.conversation.id
    messages = [(m.role, m.content, m.status) for m in tab.controller.model.messages()]
    window.new_chat()
    close_window(window)
    path = store.path
    store.close()

    again_store = Store(path)
    again = make_window(again_store, real_bridge)
    assert again.tabs.count() == 2
    restored = next(t for t in again.chat_tabs() if t.controller.conversation.id == conv_id)
    assert [(m.role, m.content, m.status) for m in restored.controller.model.messages()] == messages
    assert restored.controller.settings.max_tokens == 16
    assert restored.system_prompt.text() == "You are terse."
    assert restored.controller.conversation.title == "What is two plus two?"
    assert [b.body.text() for b in restored.view.bubbles()] == [m[1] for m in messages]
    # the restored chat continues with the real model
    assert restored.send("And three plus three?")
    assert spin(lambda: not restored.controller.busy, REPLY_TIMEOUT_S)
    assert restored.controller.model.message(3).status is MessageStatus.DONE
    close_window(again)
    again_store.close()


def test_bad_model_folder_gives_a_clear_error(qtbot, real_window, tmp_path):
    bad = tmp_path / "broken-model"
    bad.mkdir()
    (bad / "config.json").write_text('{"model_type": "llama"}')
    failures: list[str] = []
    real_window.bridge.loadFailed.connect(failures.append)
    with pytest.raises(ModelLoadError) as caught:
        run(real_window.bridge.load_model(str(bad)), timeout=120)
    message = str(caught.value)
    assert "broken-model" in message and "weights" in message
    assert failures == [message]
    assert "Model failed to load" in real_window.statusBar().currentMessage()
    dialog = real_window.show_models()
    assert dialog.add_folder(str(bad)) is not None and "weights" in dialog.error.text()
    dialog.close()
    # the engine keeps the model it had and still answers
    tab = real_window.current_tab()
    tab.controller.set_settings(GREEDY.replace(max_tokens=8))
    tab.send("Hello!")
    assert spin(lambda: not tab.controller.busy, REPLY_TIMEOUT_S)
    assert tab.controller.model.message(1).status is MessageStatus.DONE
