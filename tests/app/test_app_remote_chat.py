"""A chat on a remote server, through the window: the server is added in Models ▸ Remote
servers (its key in the keyring), its models appear in the chat's model list, the reply streams
into the chat view, Stop cancels it on the server, and a dropped stream keeps the partial reply
with a clear message."""

from __future__ import annotations

import pytest
from apphelpers import ARTIFACTS, close_window, make_window, run, spin
from mlx_lm import load as mlx_load
from remote_support import misbehaving_server, use_memory_keyring

from app.engine_bridge import EngineBridge
from app.remote.remote_spec import remote_spec
from app.store.records import MessageStatus
from tests.server.server_harness import Reference, ServerThread
from tests.tiny_models import make_tiny_llama_dir

SHOTS = ARTIFACTS / "screenshots"
KEY = "sk-window-test"


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    """A real `tandem serve` (its own thread and engine) with an API key."""
    path = make_tiny_llama_dir(tmp_path_factory.mktemp("remote-chat"), tie_word_embeddings=False)
    harness = ServerThread(path)
    served = harness.serve(api_key=KEY)
    model, tokenizer = mlx_load(str(path))
    yield path, served, Reference(model, tokenizer)
    harness.close(served)


def _last(tab):
    model = tab.controller.model
    return model.message(model.rowCount() - 1)


def test_a_chat_on_a_remote_server(store, fake_engine, remote):
    path, served, reference = remote
    use_memory_keyring()
    bridge = EngineBridge(fake_engine)
    bridge.start()
    window = make_window(store, bridge)
    try:
        dialog = window.show_remote_servers()
        run(dialog.add_server(served.url, name="Studio", api_key="wrong"))
        assert "refused the API key" in dialog.message.text()
        assert window.remote_servers.servers() == []  # nothing kept
        run(dialog.add_server(served.url, name="Studio", api_key=KEY))
        assert dialog.message.text().startswith("Added Studio")
        (server,) = window.remote_servers.servers()
        registry = window.remote_servers.registry
        # a new key is tried before it is kept: a refused one leaves the old key in place
        run(dialog.change_key(server.id, "sk-rotated-wrongly"))
        assert "refused the API key" in dialog.message.text()
        assert "unchanged" in dialog.message.text() and registry.key(server) == KEY
        dialog.list.setCurrentRow(0)
        dialog.key.setText(KEY)
        dialog.key_button.click()  # as the user does: select, type, press
        run(dialog._task)
        assert dialog.message.text().startswith("Studio now uses a new key")
        assert registry.key(server) == KEY and dialog.key.text() == ""
        SHOTS.mkdir(parents=True, exist_ok=True)
        assert dialog.grab().save(str(SHOTS / "remote-servers-dialog.png"))
        dialog.close()

        spec = remote_spec(server.id, path.name)
        combo = window.settings_form.model_combo
        assert combo.findData(spec) >= 0, [combo.itemData(i) for i in range(combo.count())]
        tab = window.current_tab()
        combo.setCurrentIndex(combo.findData(spec))  # as the user picks it
        assert tab.controller.settings.model == spec
        settings = tab.controller.settings.replace(
            temperature=0.0, min_p=0.0, repetition_penalty=1.0, max_tokens=24
        )
        tab.controller.set_settings(settings)
        tab.controller.send("Name three colours, please.")
        assert spin(lambda: not tab.controller.busy, 60)
        reply = _last(tab)
        assert reply.status is MessageStatus.DONE, reply.error
        messages = [{"role": "user", "content": "Name three colours, please."}]
        assert reply.content == reference.chat(messages, 24)[0]
        card = window.panel.chat_card
        assert card.value("ttft").endswith("ms") and card.value("rate") not in ("", "–")
        assert window.status.model_label.text()  # the window stays usable
        meter = tab.context_meter
        assert meter.budget.limit is None  # this server names no context length:
        assert meter.text().endswith(" tokens") and not meter.bar.isVisible()  # no empty bar
        assert window.grab().save(str(SHOTS / "remote-chat.png"))

        # Stop cancels the request on the server
        cancelled = served.stats.cancelled
        tab.controller.set_settings(settings.replace(max_tokens=4000))
        tab.controller.send("Now a long one")
        assert spin(lambda: len(_last(tab).content) > 20, 30)
        tab.stop()
        assert spin(lambda: not tab.controller.busy, 10)
        assert _last(tab).status is MessageStatus.STOPPED and _last(tab).content
        assert spin(lambda: served.stats.cancelled == cancelled + 1, 10)
        assert spin(lambda: served.stats.running == 0, 10)
    finally:
        close_window(window)


def test_a_dropped_stream_keeps_the_partial_reply_in_the_chat(store, fake_engine):
    use_memory_keyring()
    runner, url = run(misbehaving_server("drop"))
    bridge = EngineBridge(fake_engine)
    bridge.start()
    window = make_window(store, bridge)
    try:
        run(window.show_remote_servers().add_server(url, name="Flaky"))
        (server,) = window.remote_servers.servers()
        tab = window.current_tab()
        tab.controller.set_settings(
            tab.controller.settings.replace(model=remote_spec(server.id, "m"))
        )
        tab.controller.send("Hello?")
        assert spin(lambda: not tab.controller.busy, 30)
        reply = _last(tab)
        assert reply.content == "Hello there"
        assert reply.status is MessageStatus.ERROR
        assert "connection to Flaky dropped" in reply.error
        assert window.grab().save(str(SHOTS / "remote-dropped.png"))
    finally:
        close_window(window)
        run(runner.cleanup())
