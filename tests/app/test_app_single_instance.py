"""One Tandem per data folder, with two real processes: a second launch brings the first
window to the front and exits 0 with a line saying so; a lock left by a killed Tandem is taken
over. (No model is loaded: a missing model folder keeps the processes quick.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from PySide6.QtNetwork import QLocalSocket

from app.single_instance import LOCK_NAME, server_name

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120.0


def _env() -> dict[str, str]:
    return dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))


def _launch(data: Path, log: Path, *args: str) -> subprocess.Popen:
    no_model = str(data.parent / "no-such-model")
    return subprocess.Popen(
        [sys.executable, "-m", "app", "--data-dir", str(data), "--model", no_model, *args],
        cwd=ROOT, env=_env(), stdout=log.open("w"), stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def _run(data: Path, *args: str) -> subprocess.CompletedProcess:
    no_model = str(data.parent / "no-such-model")
    return subprocess.run(
        [sys.executable, "-m", "app", "--data-dir", str(data), "--model", no_model, *args],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=START_TIMEOUT_S,
    )  # fmt: skip


def _listening(data: Path) -> bool:
    socket = QLocalSocket()
    socket.connectToServer(server_name(data))
    up = socket.waitForConnected(200)
    socket.abort()
    return up


def _wait(predicate, what: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not predicate():
        assert proc.poll() is None, f"the first Tandem exited early while waiting for {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_second_launch_activates_the_first_and_exits(qtbot, tmp_path):
    data, log = tmp_path / "data", tmp_path / "first.log"
    first = _launch(data, log, "--verbose")
    try:
        _wait(lambda: _listening(data), "the first Tandem to listen", first)
        assert (data / LOCK_NAME).is_file()
        second = _run(data)
        assert second.returncode == 0, second.stderr[-2000:]
        line = second.stdout.strip()
        assert line.startswith(f"Tandem is already running with the data folder {data}")
        assert f"(process {first.pid})" in line and "brought to the front" in line
        _wait(lambda: "another launch asked for the window" in log.read_text(), "activate", first)
        assert first.poll() is None, "the first Tandem must keep running"
    finally:
        first.send_signal(signal.SIGINT)  # closes the window cleanly
        first.wait(timeout=60)
    assert first.returncode == 0, log.read_text()[-2000:]
    assert "Fatal Python error" not in log.read_text()
    assert not _listening(data)


def test_lock_left_by_a_killed_tandem_is_taken_over(qtbot, tmp_path):
    data, log = tmp_path / "data", tmp_path / "killed.log"
    killed = _launch(data, log)
    _wait(lambda: _listening(data), "the first Tandem to listen", killed)
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait(timeout=30)
    assert (data / LOCK_NAME).is_file()  # left behind
    after = _run(data, "--quit-when-ready")
    assert "already running" not in after.stdout
    # it started as the owner: it went on to load its model (missing here) and said so
    assert after.returncode == 1 and "failed:" in after.stdout, after.stdout + after.stderr[-2000:]
