"""A temporary folder for MLX's compilers (engine/kernels/temp_folder.py): C++'s
temp_directory_path fails where the first of TMPDIR, TMP, TEMP and TEMPDIR that is set names no
folder, and every reply on the CPU failed with a filesystem error."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine.kernels.temp_folder import TEMP_ENVS, mend_temp_folder

pytestmark = pytest.mark.timeout(180)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_temp_env(monkeypatch):
    for name in TEMP_ENVS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_a_variable_naming_no_folder_is_pointed_at_tandems(no_temp_env, tmp_path, caplog):
    no_temp_env.setenv("TEMP", str(tmp_path / "gone"))
    no_temp_env.setenv("TEMPDIR", str(tmp_path))  # read only after TEMP: not the one to mend
    assert mend_temp_folder(tmp_path / "cache") == "TEMP"
    assert os.environ["TEMP"] == str(tmp_path / "cache" / "tmp")
    assert Path(os.environ["TEMP"]).is_dir()
    assert "TEMP=" in caplog.text and "is not a folder" in caplog.text


@pytest.mark.parametrize("value", ["", "0"])
def test_an_empty_or_relative_non_folder_is_mended_too(no_temp_env, tmp_path, value):
    no_temp_env.chdir(tmp_path)
    no_temp_env.setenv("TMPDIR", value)
    assert mend_temp_folder(tmp_path / "cache") == "TMPDIR"


def test_a_usable_folder_or_none_set_is_left_alone(no_temp_env, tmp_path):
    assert mend_temp_folder(tmp_path / "cache") is None
    no_temp_env.setenv("TMP", str(tmp_path))
    no_temp_env.setenv("TEMP", str(tmp_path / "gone"))  # TMP comes first: TEMP is not read
    assert mend_temp_folder(tmp_path / "cache") is None
    assert os.environ["TMP"] == str(tmp_path)
    assert not (tmp_path / "cache").exists()


def test_replies_come_with_a_temp_variable_naming_no_folder(tiny, tmp_path):
    """The engine in a process of its own with TEMP naming no folder (MLX compiles mlx-lm's
    compiled functions there on the CPU): the reply comes, greedy as ever."""
    script = textwrap.dedent(
        f"""
        import asyncio
        from engine.api import Engine, EngineConfig
        from engine.requests import ErrorEvent, FinishedEvent, GenerationRequest

        async def main():
            eng = Engine(EngineConfig(model={str(tiny.path)!r}, prompt_cache=False))
            eng.start()
            await eng.wait_ready()
            request = GenerationRequest(prompt_tokens=[5, 6, 7, 8], max_tokens=6)
            async for event in eng.submit(request):
                if isinstance(event, ErrorEvent):
                    print("ERROR", event.message)
                if isinstance(event, FinishedEvent):
                    print("TOKENS", event.token_ids)
            await eng.stop()

        asyncio.run(main())
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in TEMP_ENVS}
    env.update(TEMP=str(tmp_path / "gone"), TANDEM_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=150
    )
    assert "ERROR" not in done.stdout, done.stdout + done.stderr[-2000:]
    assert f"TOKENS {tiny.greedy([5, 6, 7, 8], 6)}" in done.stdout, done.stderr[-2000:]
