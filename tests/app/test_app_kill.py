"""Kill the app with SIGKILL in the middle of a reply (the real default model): everything the
reply bubble had shown is in SQLite, and the next start shows the reply as interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from apphelpers import close_window, make_window

from app.paths import database_path
from app.store.conversation_store import Store
from app.store.records import MessageStatus, Role

ROOT = Path(__file__).resolve().parents[2]
HELPER = Path(__file__).with_name("kill_helper.py")
SHOWN_CHARS_BEFORE_KILL = 40
START_TIMEOUT_S = 600.0


@pytest.mark.slow
def test_sigkill_mid_reply_loses_nothing_shown(qloop, qtbot, tmp_path, monkeypatch, fake_bridge):
    data = tmp_path / "killed"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [
            sys.executable,
            str(HELPER),
            str(data),
            "Write a long story about a lighthouse keeper.",
            "400",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    shown = ""
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        for line in proc.stdout:
            if line.startswith("SHOWN "):
                shown = json.loads(line[6:])
                if len(shown) >= SHOWN_CHARS_BEFORE_KILL:
                    break
            assert time.monotonic() < deadline, "the helper did not stream in time"
        else:
            pytest.fail(f"the helper exited early (rc {proc.wait()})")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    print(f"\nkilled after the reply showed {len(shown)} characters: {shown[:60]!r}…")

    monkeypatch.setenv("TANDEM_DATA_DIR", str(data))
    store = Store(database_path())
    assert store.recovered == 1
    conversation = store.open_conversations()[0]
    reply = store.messages(conversation.id)[-1]
    assert reply.role is Role.ASSISTANT
    assert reply.status is MessageStatus.INTERRUPTED
    assert reply.content.startswith(shown), "text that was on screen is missing after the kill"

    window = make_window(store, fake_bridge)
    bubble = window.current_tab().view.bubbles()[-1]
    assert bubble.status_badge.text() == "interrupted" and bubble.status_badge.isVisible()
    assert bubble.body.text() == reply.content
    close_window(window)
    store.close()
