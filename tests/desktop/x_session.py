"""A real X server for tests (Xvfb), and what a user does in it: find the app's window, type a
question with real key events (xdotool) and wait until the reply is in the app's store. Used by
the app's own xcb test and by the bundle's."""

from __future__ import annotations

import os
import select
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

TOOLS = {"Xvfb": "xvfb", "xdotool": "xdotool", "import": "imagemagick"}  # command: package
SCREEN = (1600, 1000)
DEFAULT_REPLY_TIMEOUT_S = 180.0
Message = tuple[str, str, str]  # role, status, content


@pytest.fixture
def x_display() -> Iterator[str]:
    """A fresh Xvfb on a display number it picks itself (-displayfd); its name, e.g. ':3'."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        packages = " ".join(TOOLS[tool] for tool in missing)
        reason = f"needs {', '.join(missing)}: apt-get install {packages} (.ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    read_end, write_end = os.pipe()
    width, height = SCREEN
    server = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write_end), "-screen", "0", f"{width}x{height}x24"]
        + ["-nolisten", "tcp"],
        pass_fds=(write_end,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write_end)
    try:
        ready, _, _ = select.select([read_end], [], [], 30)
        number = os.read(read_end, 64).decode().strip() if ready else ""
        assert number.isdigit(), "Xvfb did not report its display"
        yield f":{number}"
    finally:
        os.close(read_end)
        server.terminate()
        server.wait(timeout=30)


def run_x(display: str, *args: str, timeout: float = 30) -> str:
    """Run an X client on `display`; its output (the test fails when it does)."""
    result = subprocess.run(
        list(args), env=dict(os.environ, DISPLAY=display), capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip
    assert result.returncode == 0, f"{args}: {result.stderr}"
    return result.stdout


def wait_for(
    predicate: Callable[[], bool], timeout: float, app: subprocess.Popen, what: str
) -> None:
    """Poll until `predicate` holds; fail when the app exits first or time runs out."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if app.poll() is not None:
            raise AssertionError(f"the app exited ({app.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} after {timeout:.0f} s")
        time.sleep(0.2)


def messages(database: Path) -> list[Message]:
    """The chat messages in the app's store, oldest first (read-only)."""
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        return db.execute(
            "SELECT role, status, content FROM messages WHERE deleted IS NULL ORDER BY id"
        ).fetchall()


def app_window(display: str) -> str:
    """The id of the app's visible main window (waits for it to be mapped)."""
    found = run_x(display, "xdotool", "search", "--sync", "--onlyvisible", "--name", "Tandem")
    return found.split()[0]


def ask(
    display: str,
    window: str,
    question: str,
    *,
    database: Path,
    app: subprocess.Popen,
    timeout: float = DEFAULT_REPLY_TIMEOUT_S,
) -> list[Message]:
    """Type `question` into the focused window and press Return, as a user would, then wait
    for the finished reply in the store; returns the store's messages."""
    # no window manager here: give the window the keyboard focus ourselves
    run_x(display, "xdotool", "windowfocus", "--sync", window)
    run_x(display, "xdotool", "type", "--delay", "20", question)
    run_x(display, "xdotool", "key", "Return")

    def replied() -> bool:
        rows = messages(database)
        return len(rows) == 2 and rows[1][1] == "done"

    wait_for(replied, timeout, app, "finished reply in the store")
    return messages(database)
