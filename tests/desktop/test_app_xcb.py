"""The real app in a real X server: Xvfb with QT_QPA_PLATFORM=xcb (not offscreen), a question
typed with real key events (xdotool), the default model's reply in the store, and a screenshot
taken through the X server (artifacts/xcb-window.png)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.desktop.x_session import SCREEN, app_window, ask, run_x, wait_for

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
WINDOW = (1360, 860)  # the main window's first size, at the top left (no window manager here)
READY_TIMEOUT_S = 600.0  # a cold user cache converts the default model first
QUESTION = "What is the capital of France?"
MAX_TOKENS = 24
pytestmark = pytest.mark.slow


def _desktop_env(tmp_path: Path, display: str) -> dict[str, str]:
    """A desktop session of a fresh user: its own HOME and XDG folders, this X display."""
    from engine.default_model import default_cache_root

    home = tmp_path / "home"
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k not in ("WAYLAND_DISPLAY", "TANDEM_DATA_DIR")}
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home / ".local/share"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_STATE_HOME=str(home / ".local/state"),
        XDG_RUNTIME_DIR=str(runtime),
        DISPLAY=display,
        QT_QPA_PLATFORM="xcb",
        PYTHONPATH=str(ROOT),
        # the converted default model the other tests use: converting it again costs a minute
        TANDEM_CACHE_DIR=str(default_cache_root()),
    )
    return env


def test_the_app_on_a_real_x_server_answers_a_typed_question(x_display, tmp_path):
    from app.settings.chat_settings import ChatSettings
    from app.store.conversation_store import Store

    data = tmp_path / "data"
    store = Store(data / "tandem.sqlite3")  # new chats get a short, greedy reply
    store.set_default_chat_settings(ChatSettings(max_tokens=MAX_TOKENS, temperature=0.0))
    store.close()
    ready_file = tmp_path / "ready"
    log = (tmp_path / "app.log").open("w")
    started = time.monotonic()
    app = subprocess.Popen(
        [sys.executable, "-m", "app", "--data-dir", str(data), "--ready-file", str(ready_file)],
        cwd=tmp_path, env=_desktop_env(tmp_path, x_display), stdout=log, stderr=log,
    )  # fmt: skip
    try:
        wait_for(ready_file.exists, READY_TIMEOUT_S, app, "ready file")
        assert ready_file.read_text().strip() == "SmolLM2-135M-Instruct"
        ready_s = time.monotonic() - started
        database = data / "tandem.sqlite3"
        rows = ask(x_display, app_window(x_display), QUESTION, database=database, app=app)
        (user, _, question), (assistant, _, reply) = rows
        assert (user, question) == ("user", QUESTION)  # every key arrived, in order
        assert assistant == "assistant" and "Paris" in reply
        time.sleep(0.5)  # the last paint after the store write

        shot = tmp_path / "xcb-window.png"
        run_x(x_display, "import", "-window", "root", str(shot))
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copy(shot, ARTIFACTS / "xcb-window.png")
        _assert_shows_a_window(shot)
    finally:
        app.send_signal(signal.SIGINT)  # the app closes its windows and stops cleanly
        try:
            app.wait(timeout=60)
        finally:
            if app.poll() is None:
                app.kill()
            log.close()
    output = (tmp_path / "app.log").read_text()
    assert app.returncode == 0, output[-3000:]
    assert "Traceback" not in output and "qt.qpa" not in output, output[-3000:]
    print(f"\nready in {ready_s:.1f} s; reply: {reply!r}")


def _assert_shows_a_window(png: Path) -> None:
    """The screen holds the app, not Xvfb's black root: mostly light pixels, many colours."""
    from PySide6.QtGui import QImage

    image = QImage(str(png))
    assert (image.width(), image.height()) == SCREEN
    colours = set()
    light = 0
    samples = 0
    for y in range(0, WINDOW[1], 10):
        for x in range(0, WINDOW[0], 10):
            rgb = image.pixel(x, y) & 0xFFFFFF
            colours.add(rgb)
            light += sum((rgb >> s) & 0xFF for s in (0, 8, 16)) > 600
            samples += 1
    assert light > samples // 2 and len(colours) > 20, (light, samples, len(colours))
