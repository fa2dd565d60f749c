"""The entry points: `python -m app` starts, loads the default model and quits cleanly; a bad
model folder on the command line is reported clearly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _run_app(*args: str, data: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "app", "--data-dir", str(data), "--quit-when-ready", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_python_m_app_starts_and_quits(tmp_path):
    result = _run_app(data=tmp_path / "data")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "ready: SmolLM2-135M-Instruct" in result.stdout
    assert (tmp_path / "data" / "tandem.sqlite3").is_file()
    assert "Fatal Python error" not in result.stderr


def test_bad_model_folder_on_the_command_line(tmp_path):
    bad = tmp_path / "empty-folder"
    bad.mkdir()
    result = _run_app("--model", str(bad), data=tmp_path / "data")
    assert result.returncode == 1
    assert "failed:" in result.stdout and "config.json is missing" in result.stdout


def test_gui_script_entry_point():
    from app.main import main, parse_args

    assert callable(main)
    assert parse_args(["--theme", "dark"]).theme == "dark"
