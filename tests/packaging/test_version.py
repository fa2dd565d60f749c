"""One version number, pyproject.toml's, everywhere Tandem shows one: `python -m app --version`,
the `tandem` command, the About dialog and (tests/packaging/test_bundle.py) the bundle."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from importlib import metadata

import pytest
from packaging_support import ROOT, pyproject_version

from app.version import app_version, version_report
from app.window.about_dialog import about_info
from engine.engine_reports import EngineStats


def test_the_installed_version_is_pyprojects():
    assert metadata.version("tandem") == pyproject_version()
    assert app_version() == pyproject_version()


def test_python_m_app_version_prints_it_with_the_runtime_and_quits_before_any_window():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("QT_QPA_PLATFORM", None)
    env.pop("DISPLAY", None)  # no screen needed: it quits before Qt would look for one
    result = subprocess.run(
        [sys.executable, "-m", "app", "--version"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    first, runtime = result.stdout.splitlines()
    assert first == f"tandem {pyproject_version()}"
    assert f"MLX {metadata.version('mlx')}, mlx-lm {metadata.version('mlx-lm')}, Qt " in runtime
    assert result.stdout == version_report() + "\n"


def test_the_about_dialog_shows_the_same_version():
    assert about_info(EngineStats()).version == pyproject_version()


def test_a_bundle_reads_the_version_baked_into_it(monkeypatch):
    baked = types.ModuleType("tandem_bundle_version")
    baked.VERSION = "9.8.7"
    monkeypatch.setitem(sys.modules, baked.__name__, baked)
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert app_version() == "9.8.7"


def test_the_version_module_the_spec_writes_holds_pyprojects_version(tmp_path):
    pytest.importorskip("PyInstaller", reason="needs the package extra (make package installs it)")
    import bundle_contents

    folder = bundle_contents.write_version_module(tmp_path)
    namespace: dict = {}
    exec((folder / "tandem_bundle_version.py").read_text(), namespace)
    assert namespace["VERSION"] == pyproject_version()
