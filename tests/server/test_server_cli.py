"""`tandem serve` as people run it: its own process, headless, until Ctrl+C."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


def test_serve_runs_headless_and_stops_on_ctrl_c(tiny_dir):
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--model", str(tiny_dir), "--port", "0"],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()
        found = re.match(
            rf"serving {re.escape(tiny_dir.name)} at (http://127\.0\.0\.1:\d+/v1)", line
        )
        assert found, line + process.stderr.read() if not line else line
        url = found.group(1)
        with urllib.request.urlopen(url + "/models", timeout=30) as reply:
            assert json.load(reply)["data"][0]["id"] == tiny_dir.name
        request = urllib.request.Request(
            url + "/completions",
            data=json.dumps({"prompt": "One, two,", "max_tokens": 5, "temperature": 0}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as reply:
            assert json.load(reply)["usage"]["completion_tokens"] == 5
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_serve_imports_no_qt():
    code = (
        "import sys, app.main, server.cli, server.local_server, server.app_factory; "
        "print(sorted(m for m in sys.modules if m.startswith(('PySide6', 'shiboken', 'qasync'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=ENV, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_a_taken_port_is_a_clear_failure(tiny_dir):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "server", "--model", str(tiny_dir), "--port", str(port)],
            cwd=ROOT,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
