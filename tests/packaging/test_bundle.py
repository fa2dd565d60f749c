"""The bundle `make package` built (dist/tandem/tandem), run as a user would: on its own, from a
fresh HOME with no Python environment. It prints pyproject's version, carries what is imported
or loaded by name at run time, starts offline on the default model it carries, and on a real X
server answers a typed question in a window whose WM_CLASS is the .desktop file's
StartupWMClass. Skipped without a bundle; in CI (.ci/run builds it first) a missing one fails."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import mlx_lm
import pytest
from packaging_support import (
    BUNDLE_PROGRAM,
    DESKTOP_TEMPLATE,
    clean_env,
    desktop_entry_values,
    pyproject_version,
    require,
)

from tests.desktop.x_session import app_window, ask, run_x, wait_for

pytestmark = pytest.mark.slow
INTERNAL = BUNDLE_PROGRAM.parent / "_internal"  # PyInstaller 6's data and library folder
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
QUESTION = "What is the capital of France?"


@pytest.fixture(scope="module")
def bundle() -> Path:
    require(BUNDLE_PROGRAM.is_file(), f"no bundle at {BUNDLE_PROGRAM}: run `make package`")
    return BUNDLE_PROGRAM


def _run(argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 600) -> str:
    result = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    return output


@pytest.fixture(scope="module")
def archived_modules(bundle) -> set[str]:
    """Every module in the bundle's PYZ archive (compiled Python, inside the executable)."""
    pytest.importorskip("PyInstaller", reason="reads the archive with PyInstaller's reader")
    from PyInstaller.archive.readers import pkg_archive_contents

    return set(pkg_archive_contents(str(bundle), recursive=True))


def test_the_bundle_prints_pyprojects_version(bundle, tmp_path):
    first, runtime = _run([str(bundle), "--version"], clean_env(tmp_path), tmp_path).splitlines()
    assert first == f"tandem {pyproject_version()}"
    assert "not installed" not in runtime  # MLX's and mlx-lm's metadata came along for About
    assert f"mlx-lm {mlx_lm.__version__}" in runtime


def test_the_bundle_carries_every_module_imported_by_name(archived_modules):
    models = Path(mlx_lm.__file__).parent / "models"
    wanted = {
        f"mlx_lm.models.{path.stem}" for path in models.glob("*.py") if path.stem != "__init__"
    }
    wanted |= {
        "tandem_bundle_version",  # app/version.py, frozen
        "mlx._reprlib_fix",  # imported by mlx.core's C extension
        "transformers.models.llama.tokenization_llama",
        "pygments.lexers.python",  # code blocks: lexers and styles are found by name
        "pygments.styles.default",
        "platformdirs.unix",
        "qasync",
        "app.main",
        "engine.worker",
    }
    assert wanted <= archived_modules, sorted(wanted - archived_modules)


def test_the_bundle_carries_its_native_libraries_plugins_and_the_model(bundle):
    import tandem_build_backend as backend

    plugins = INTERNAL / "PySide6" / "Qt" / "plugins"
    for name in ("libqxcb.so", "libqwayland.so", "libqoffscreen.so"):
        assert (plugins / "platforms" / name).is_file(), name
    assert any((plugins / "wayland-shell-integration").glob("*.so"))
    assert (INTERNAL / "mlx" / "lib" / "libmlx.so").is_file()
    assert (INTERNAL / "libopenblas.so.0").is_file()  # engine/blas.py loads it in a bundle
    assert not list(INTERNAL.glob("libcudart*"))  # a build machine's CUDA must never ship
    assert not (INTERNAL / "PIL").exists()  # the .venv's bench extra, not the app
    gguf = INTERNAL / "resources" / "models" / GGUF
    assert backend.sha256(gguf) == backend.GGUF_SHA256
    assert (gguf.parent / "SmolLM2-135M-Instruct.LICENSE").is_file()
    assert (INTERNAL / "resources" / "icons" / "check.svg").is_file()
    drafts = INTERNAL / "resources" / "drafts"  # the default model's trained draft head
    assert (drafts / "smollm2-135m-eagle.safetensors").is_file()
    assert (drafts / "smollm2-135m-eagle.json").is_file()


def test_the_bundle_starts_offline_on_the_default_model_from_a_fresh_home(bundle, tmp_path):
    env = clean_env(tmp_path, HF_HUB_OFFLINE="1")
    output = _run([str(bundle), "--quit-when-ready", "--verbose"], env, tmp_path)
    assert "ready: SmolLM2-135M-Instruct" in output
    assert "BLAS: OpenBLAS" in output, output[-3000:]  # the bundled copy, interposed
    assert list((tmp_path / "cache" / "models").glob("SmolLM2-135M-Instruct-*"))  # converted


def test_the_bundle_on_a_real_x_server_answers_and_its_window_class_matches_the_launcher(
    bundle, x_display, tmp_path
):
    from app.settings.chat_settings import ChatSettings
    from app.store.conversation_store import Store

    data = tmp_path / "data"
    store = Store(data / "tandem.sqlite3")  # new chats get a short, greedy reply
    store.set_default_chat_settings(ChatSettings(max_tokens=24, temperature=0.0))
    store.close()
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    env = clean_env(
        tmp_path, DISPLAY=x_display, QT_QPA_PLATFORM="xcb", XDG_RUNTIME_DIR=str(runtime)
    )
    ready = tmp_path / "ready"
    log = (tmp_path / "app.log").open("w")
    app = subprocess.Popen(
        [str(bundle), "--ready-file", str(ready)], cwd=tmp_path, env=env, stdout=log, stderr=log
    )
    try:
        wait_for(ready.exists, 600, app, "ready file")
        window = app_window(x_display)
        wm_class = desktop_entry_values(DESKTOP_TEMPLATE.read_text())["StartupWMClass"]
        by_class = run_x(
            x_display, "xdotool", "search", "--onlyvisible", "--class", f"^{wm_class}$"
        )
        assert window in by_class.split()
        rows = ask(x_display, window, QUESTION, database=data / "tandem.sqlite3", app=app)
        assert "Paris" in rows[1][2]
    finally:
        app.send_signal(signal.SIGINT)
        try:
            app.wait(timeout=60)
        finally:
            if app.poll() is None:
                app.kill()
            log.close()
    output = (tmp_path / "app.log").read_text()
    assert app.returncode == 0, output[-3000:]
    assert "Traceback" not in output and "qt.qpa" not in output, output[-3000:]
