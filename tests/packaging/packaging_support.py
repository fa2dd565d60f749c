"""Shared by the packaging tests: where things are, and how a packaging tool that is missing
skips a test here but fails it in CI (.ci/run installs every one)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGING = ROOT / "packaging"
DESKTOP_TEMPLATE = PACKAGING / "linux" / "tandem.desktop"
BUNDLE_PROGRAM = ROOT / "dist" / "tandem" / "tandem"  # make package, on Linux


def pyproject_version() -> str:
    """[project] version, the first `version = "..."` line in pyproject.toml."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    return re.search(r'^version = "([^"]+)"$', text, flags=re.M)[1]


def require(condition: bool, reason: str) -> None:
    """Skip with `reason` when `condition` is false; in CI, fail instead."""
    if not condition:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


def require_tool(command: str, package: str) -> str:
    path = shutil.which(command)
    require(path is not None, f"needs {command}: apt-get install {package} (.ci/run does)")
    return path


def desktop_entry_values(text: str) -> dict[str, str]:
    """The [Desktop Entry] group's keys and raw values."""
    values, group = {}, None
    for line in text.splitlines():
        if line.startswith("["):
            group = line.strip("[]")
        elif "=" in line and group == "Desktop Entry" and not line.startswith("#"):
            key, value = line.split("=", 1)
            values[key.strip()] = value.strip()
    return values


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A fresh user with no Python environment: no venv, no PYTHONPATH, an empty HOME and caches."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "QT_QPA_PLATFORM": "offscreen",
        "TANDEM_DATA_DIR": str(tmp_path / "data"),
        "TANDEM_CACHE_DIR": str(tmp_path / "cache"),
        "TANDEM_PROMPT_CACHE_DIR": str(tmp_path / "prompt-cache"),
    }
    env.update(extra)
    return env
