"""Files go where a desktop app keeps them. The app (`python -m app --quit-when-ready`) and the
engine (a request with the prompt cache on) run from an empty working folder, as a fresh user
with no TANDEM_* overrides: conversations land in platformdirs' user data folder, the converted
default model and the prompt cache in its user cache folder, and nothing in the working folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APP_NAME = "tandem"
pytestmark = pytest.mark.slow

ENGINE_REQUEST = """
import asyncio
from engine.api import Engine, EngineConfig
from engine.requests import GenerationRequest, TokenEvent

async def main():
    engine = Engine(EngineConfig(model=None, prompt_cache=True))
    engine.start()
    await engine.wait_ready()
    request = GenerationRequest(
        messages=[{"role": "user", "content": "Name three colours."}], max_tokens=8
    )
    text = [e.text async for e in engine.submit(request) if isinstance(e, TokenEvent)]
    await engine.stop()  # finishes the prompt cache's disk writes
    print("reply:", "".join(text))

asyncio.run(main())
"""

USER_DIRS = """
import json, platformdirs
print(json.dumps({
    "data": platformdirs.user_data_dir("tandem"),
    "cache": platformdirs.user_cache_dir("tandem"),
    "config": platformdirs.user_config_dir("tandem"),
    "state": platformdirs.user_state_dir("tandem"),
    "log": platformdirs.user_log_dir("tandem"),
}))
"""


def _fresh_user_env(home: Path) -> dict[str, str]:
    """This process's environment as a new desktop user: HOME and XDG folders under `home`,
    no TANDEM_* override, no display (offscreen)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TANDEM_", "XDG_")) and k not in ("DISPLAY", "WAYLAND_DISPLAY")
    }
    runtime = home / "runtime"
    runtime.mkdir(parents=True, mode=0o700)
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home / "xdg-data"),
        XDG_CACHE_HOME=str(home / "xdg-cache"),
        XDG_CONFIG_HOME=str(home / "xdg-config"),
        XDG_STATE_HOME=str(home / "xdg-state"),
        XDG_RUNTIME_DIR=str(runtime),
        QT_QPA_PLATFORM="offscreen",
        PYTHONPATH=str(ROOT),
    )
    return env


# MLX used from a thread other than the main one sometimes aborts in its own teardown at the
# interpreter's exit, after everything ran and was written (mlx issue #3126; the benchmark leaves
# with os._exit for it). What this file checks is where files land, so that abort, as the last
# line of a run without a traceback, is not a failure here.
MLX_TEARDOWN_ABORT = "terminate called without an active exception"


def _python(args: list[str], *, cwd: Path, env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )
    teardown = (
        result.returncode in (-6, 134)
        and result.stderr.rstrip().endswith(MLX_TEARDOWN_ABORT)
        and "Traceback" not in result.stderr
    )
    assert result.returncode == 0 or teardown, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout


@pytest.fixture(scope="module")
def fresh_user(tmp_path_factory):
    """Run the app, then the engine, from an empty working folder; return where things are."""
    root = tmp_path_factory.mktemp("fresh-user")
    work, home = root / "work", root / "home"
    work.mkdir()
    env = _fresh_user_env(home)
    app_out = _python(["-m", "app", "--quit-when-ready"], cwd=work, env=env)
    assert "ready: SmolLM2-135M-Instruct" in app_out
    engine_out = _python(["-c", ENGINE_REQUEST], cwd=work, env=env)
    assert engine_out.startswith("reply: ")
    dirs = json.loads(_python(["-c", USER_DIRS], cwd=work, env=env))
    return {"work": work, "home": home, **{k: Path(v) for k, v in dirs.items()}}


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def test_the_user_folders_are_the_fresh_users_xdg_folders(fresh_user):
    home = fresh_user["home"]
    if sys.platform.startswith("linux"):
        assert fresh_user["data"] == home / "xdg-data" / APP_NAME
        assert fresh_user["cache"] == home / "xdg-cache" / APP_NAME
    for key in ("data", "cache", "config", "state", "log"):
        assert fresh_user[key].is_relative_to(home)


def test_conversations_and_settings_live_in_the_user_data_folder(fresh_user):
    import sqlite3

    database = fresh_user["data"] / "tandem.sqlite3"
    assert database.is_file()
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        settings = dict(db.execute("SELECT key, value FROM settings").fetchall())
    assert "model" in settings  # the app's settings are in the same store


def test_the_converted_default_model_lives_in_the_user_cache(fresh_user):
    manifests = list((fresh_user["cache"] / "models").glob("*/tandem-manifest.json"))
    assert [m.parent.name for m in manifests] == ["SmolLM2-135M-Instruct-float32-v1"]


def test_tandem_writes_nothing_outside_its_user_folders(fresh_user):
    """Everything under HOME is in one of Tandem's platformdirs folders, except the caches
    that Qt's font configuration keeps for every program (fontconfig)."""
    ours = [fresh_user[k] for k in ("data", "cache", "config", "state", "log")]
    home = fresh_user["home"]
    shared = [home / "xdg-cache" / "fontconfig", home / "runtime"]
    stray = [f for f in _files(home) if not any(f.is_relative_to(d) for d in ours + shared)]
    assert not stray, stray


def test_the_prompt_cache_lives_in_the_user_cache(fresh_user):
    files = _files(fresh_user["cache"] / "prompt-cache")
    assert files, f"no prompt cache under {fresh_user['cache']}; the working folder has " + str(
        _files(fresh_user["work"])
    )


def test_nothing_lands_in_the_working_folder(fresh_user):
    work = fresh_user["work"]
    assert _files(work) == [] and list(work.iterdir()) == [], [
        str(p.relative_to(work)) for p in sorted(work.rglob("*"))
    ]
