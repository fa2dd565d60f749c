"""The app's "Local server" toggle: the OpenAI server in the app's qasync loop on the app's
engine (a tiny random model); its requests run next to a chat's and the panel counts them."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from apphelpers import ARTIFACTS, close_window, make_window, run, spin

from app.engine_bridge import EngineBridge
from engine.api import EngineConfig
from tests.tiny_models import make_tiny_llama_dir

SHOTS = ARTIFACTS / "screenshots"


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return make_tiny_llama_dir(tmp_path_factory.mktemp("app-server-model"))


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        return json.load(reply)


def test_local_server_toggle_serves_the_apps_engine(store, tiny_dir):
    store.set_setting("local_server_port", 0)  # a free port
    bridge = EngineBridge(config=EngineConfig(model=str(tiny_dir), log_blas=False))
    bridge.start()
    window = make_window(store, bridge)
    try:
        assert spin(lambda: bridge.ready, 60)
        panel = window.panel.engine_card
        assert panel.value("api") == "server off"
        assert not window.status.server_label.isVisible()

        window.menu_actions.local_server.setChecked(True)  # the menu's toggle
        assert spin(lambda: window.local_server.running, 10)
        url = window.local_server.url
        port = url.rsplit(":", 1)[1].split("/")[0]
        assert window.status.server_label.text() == f"API :{port}"
        assert store.setting("local_server") is True

        # a chat and four API requests at once, in the same engine
        tab = window.current_tab()
        tab.controller.send("Tell me a long story")
        with ThreadPoolExecutor(4) as pool:
            body = {
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 200,
                "temperature": 0,
            }
            futures = [pool.submit(_post, url + "/chat/completions", body) for _ in range(4)]
            assert spin(
                lambda: "running" in panel.value("api") and not panel.value("api").startswith("0"),
                30,
            )
            shown_batch = []
            spin(lambda: shown_batch.append(bridge.stats().batch_size) or max(shown_batch) >= 2, 30)
            assert spin(lambda: all(f.done() for f in futures), 60)
        replies = [f.result() for f in futures]
        assert len({r["choices"][0]["message"]["content"] for r in replies}) == 1
        assert max(shown_batch) >= 2  # API rows and the chat's shared the batch
        assert spin(lambda: panel.value("api") == "0 running · 4 served", 10)
        SHOTS.mkdir(parents=True, exist_ok=True)
        assert window.grab().save(str(SHOTS / "local-server.png"))

        window.menu_actions.local_server.setChecked(False)
        assert spin(lambda: not window.status.server_label.isVisible(), 10)  # once it stopped
        assert not window.local_server.running
        assert panel.value("api") == "server off"
        assert store.setting("local_server") is False
    finally:
        close_window(window)
        run(bridge.stop(), timeout=30)


def test_a_taken_port_says_so_and_turns_the_toggle_off(store, fake_engine):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        store.set_setting("local_server_port", taken.getsockname()[1])
        bridge = EngineBridge(fake_engine)
        bridge.start()
        window = make_window(store, bridge)
        try:
            window.menu_actions.local_server.setChecked(True)
            assert spin(lambda: "cannot listen on" in window.status.currentMessage(), 10)
            assert spin(lambda: not window.menu_actions.local_server.isChecked(), 5)
            assert not window.local_server.running
        finally:
            close_window(window)


def test_the_server_key_lives_in_the_keyring_and_guards_the_server(store, fake_engine):
    import urllib.error

    from remote_support import use_memory_keyring

    from app.window.local_server_controller import KEYRING_SERVICE, KEYRING_USER

    keys = use_memory_keyring()
    store.set_setting("local_server_port", 0)
    bridge = EngineBridge(fake_engine)
    bridge.start()
    window = make_window(store, bridge)
    try:
        server = window.local_server
        server.set_enabled(True)
        assert spin(lambda: server.running, 10)
        assert server.set_api_key("sk-local")
        assert keys.passwords[(KEYRING_SERVICE, KEYRING_USER)] == "sk-local"
        assert "sk-local" not in str(store.setting("local_server"))
        assert spin(lambda: server.running and server._server.api_key == "sk-local", 10)
        url = server.url + "/models"
        with pytest.raises(urllib.error.HTTPError) as refused:
            run(asyncio.to_thread(urllib.request.urlopen, url, timeout=10))
        assert refused.value.code == 401
        request = urllib.request.Request(url, headers={"Authorization": "Bearer sk-local"})
        reply = run(asyncio.to_thread(urllib.request.urlopen, request, timeout=10))
        assert reply.status == 200
        assert server.set_api_key("")
        assert (KEYRING_SERVICE, KEYRING_USER) not in keys.passwords
    finally:
        close_window(window)


def test_the_local_server_dialog_sets_where_it_listens_its_key_and_the_switch(store, fake_engine):
    import socket

    from remote_support import use_memory_keyring

    from app.window.local_server_dialog import OPEN_WITHOUT_KEY

    use_memory_keyring()
    store.set_setting("local_server_port", 0)  # a free port
    bridge = EngineBridge(fake_engine)
    bridge.start()
    window = make_window(store, bridge)
    try:
        dialog = window.show_local_server()
        server = window.local_server
        assert dialog.host.currentData() == "127.0.0.1"
        assert dialog.port.text() == "any free port" and dialog.state.text() == "Off"
        assert not dialog.warning.isVisibleTo(dialog)

        dialog.enabled.setChecked(True)
        dialog.apply()
        assert spin(lambda: server.running, 10)
        assert spin(lambda: dialog.state.text() == f"Running at {server.url}", 5)
        assert window.menu_actions.local_server.isChecked()  # the menu follows

        # every interface, without a key: the dialog warns; with a key it does not
        dialog.host.setCurrentIndex(dialog.host.findData("0.0.0.0"))
        assert dialog.warning.isVisibleTo(dialog) and dialog.warning.text() == OPEN_WITHOUT_KEY
        dialog.resize(560, dialog.sizeHint().height())
        assert dialog.grab().save(str(SHOTS / "local-server-dialog-open.png"))
        dialog.key.setText("sk-lan")
        assert not dialog.warning.isVisibleTo(dialog)
        dialog.apply()  # the running server restarts there, with the key
        assert spin(lambda: server.running and server._server.host == "0.0.0.0", 10)
        assert server._server.api_key == "sk-lan" and server.address()[0] == "0.0.0.0"
        port = server.url.rsplit(":", 1)[1].split("/")[0]
        assert spin(lambda: f"http://127.0.0.1:{port}/v1 here" in dialog.state.text(), 5)
        dialog.resize(560, dialog.sizeHint().height())
        assert dialog.grab().save(str(SHOTS / "local-server-dialog.png"))

        # a port that is taken: said in the dialog, and the switch goes off
        with socket.socket() as taken:
            taken.bind(("0.0.0.0", 0))
            taken.listen()
            dialog.port.setValue(taken.getsockname()[1])
            dialog.apply()
            assert spin(lambda: "cannot listen on" in dialog.state.text(), 10)
            assert not dialog.enabled.isChecked() and not server.running

        dialog.port.setValue(0)
        dialog.enabled.setChecked(False)
        dialog.apply()
        assert spin(lambda: dialog.state.text() == "Off", 5)
        reopened = window.show_local_server()  # the settings were kept
        assert reopened is dialog and dialog.host.currentData() == "0.0.0.0"
        assert dialog.key.text() == "sk-lan"
    finally:
        close_window(window)


def test_without_a_system_keyring_the_dialog_says_how_to_set_a_key(store, fake_engine, caplog):
    import keyring
    from keyring.backends.fail import Keyring as NoKeyring

    previous = keyring.get_keyring()
    keyring.set_keyring(NoKeyring())
    bridge = EngineBridge(fake_engine)
    bridge.start()
    window = make_window(store, bridge)
    try:
        dialog = window.show_local_server()
        dialog.refresh()
        assert not dialog.key.isEnabled()
        assert "TANDEM_API_KEY" in dialog.key.placeholderText()
        warnings = [r for r in caplog.records if "cannot read the server key" in r.getMessage()]
        assert len(warnings) == 1  # said once, not on every read
    finally:
        close_window(window)
        keyring.set_keyring(previous)
