"""The launcher: packaging/linux/tandem.desktop is valid and matches the names Qt gives the
window, and `make install-desktop` / `make uninstall-desktop` put it and the icons in a user's
XDG folders and take them away again (a temporary HOME here)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import desktop_entry
import pytest
from icons import HICOLOR_SIZES
from packaging_support import (
    DESKTOP_TEMPLATE,
    ROOT,
    desktop_entry_values,
    require_tool,
)

STAMP = ".venv/.setup-done"


def _validate(path: Path) -> None:
    validator = require_tool("desktop-file-validate", "desktop-file-utils")
    result = subprocess.run([validator, str(path)], capture_output=True, text=True)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def _make(target: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    # -o: `make test` already ran setup, which must not run again here (.venv may be shared)
    result = subprocess.run(
        ["make", "-o", STAMP, target, f"PY={sys.executable}", f"PYTHON={sys.executable}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def _exec_argv(value: str) -> list[str]:
    """An Exec value back to its argv as a launcher reads it (Desktop Entry spec): undo the
    string escapes, then split on spaces outside double quotes, where \\ escapes " ` $ \\."""
    escapes = {"s": " ", "n": "\n", "t": "\t", "r": "\r", "\\": "\\"}
    text = re.sub(r"\\(.)", lambda m: escapes.get(m[1], "\\" + m[1]), value)
    argv, word, quoted, chars = [], "", False, iter(text)
    for ch in chars:
        if ch == '"':
            quoted = not quoted
        elif quoted and ch == "\\":
            word += next(chars)
        elif ch == " " and not quoted:
            argv += [word] if word else []
            word = ""
        else:
            word += ch
    return [*argv, word] if word else argv


def test_the_desktop_file_is_valid():
    _validate(DESKTOP_TEMPLATE)


def test_the_desktop_file_names_what_qt_sets():
    """StartupWMClass is the X11 WM_CLASS class Qt sets (the application name); the file's name
    is the Wayland app id (setDesktopFileName). test_bundle.py reads the real window's class."""
    source = (ROOT / "app" / "main.py").read_text()
    entry = desktop_entry_values(DESKTOP_TEMPLATE.read_text())
    assert 'APP_DISPLAY_NAME = "Tandem"' in source
    assert "app.setApplicationName(APP_DISPLAY_NAME)" in source
    assert entry["StartupWMClass"] == "Tandem"
    assert f'app.setDesktopFileName("{Path(desktop_entry.DESKTOP_ID).stem}")' in source
    assert entry["Icon"] == "tandem" and entry["Name"] == "Tandem"


def test_make_install_desktop_then_uninstall_desktop_in_a_fresh_home(tmp_path):
    from PySide6.QtGui import QImage

    home = tmp_path / "home"
    program = tmp_path / "opt" / "tandem"
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env.update(HOME=str(home), QT_QPA_PLATFORM="offscreen")
    share = home / ".local" / "share"  # XDG_DATA_HOME unset: the XDG default
    other_icon = share / "icons" / "hicolor" / "48x48" / "apps" / "someone-else.png"
    other_icon.parent.mkdir(parents=True)
    other_icon.write_bytes(b"not ours")
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)

    result = _make("install-desktop", dict(env, TANDEM_EXEC=str(program)))
    entry_file = share / "applications" / "tandem.desktop"
    assert str(entry_file) in result.stdout
    _validate(entry_file)
    entry = desktop_entry_values(entry_file.read_text())
    assert _exec_argv(entry["Exec"]) == [str(program)]
    assert entry["TryExec"] == str(program)
    for size in HICOLOR_SIZES:
        icon = QImage(str(share / "icons" / "hicolor" / f"{size}x{size}" / "apps" / "tandem.png"))
        assert (icon.width(), icon.height()) == (size, size)
        assert icon.pixelColor(size // 2, size // 2).alpha() == 255  # drawn, not blank
    assert (share / "icons" / "hicolor" / "scalable" / "apps" / "tandem.svg").is_file()

    _make("uninstall-desktop", env)
    assert sorted(p for p in share.rglob("*") if p.is_file()) == [other_icon]


def test_install_honours_xdg_data_home_and_quotes_an_awkward_path(qapp, tmp_path, monkeypatch):
    data_home = tmp_path / "xdg data"
    program = tmp_path / 'my "apps" $HOME' / "tan dem"
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    written = desktop_entry.install(program, desktop_entry.data_home())
    assert written == desktop_entry.installed_paths(data_home)
    assert all(path.is_file() for path in written)
    _validate(written[0])
    entry = desktop_entry_values(written[0].read_text())
    assert _exec_argv(entry["Exec"]) == [str(program)]
    assert desktop_entry.uninstall(data_home) == written
    assert desktop_entry.uninstall(data_home) == []


def test_install_without_a_program_names_the_commands_that_make_one(tmp_path, monkeypatch):
    monkeypatch.setattr(desktop_entry, "EXEC_CANDIDATES", (tmp_path / "none",))
    with pytest.raises(SystemExit) as exit_info:
        desktop_entry.default_exec()
    assert "make package" in str(exit_info.value) and "--exec" in str(exit_info.value)
