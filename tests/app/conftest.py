"""Fixtures for the app's tests: a qasync loop over pytest-qt's QApplication, a data folder per
test, a fake engine for fast widget tests and one real engine (the default model) shared by the
tests that need it."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).parent))

import pytest  # noqa: E402
from apphelpers import (  # noqa: E402
    REAL_MODEL_LOAD_TIMEOUT_S,
    close_window,
    make_window,
    run,
    spin,
    use_loop,
)

import engine  # noqa: E402,F401 - OpenBLAS before MLX
from app.qt_compat import protect_singleton_refcounts  # noqa: E402

protect_singleton_refcounts()


@pytest.fixture(scope="package")
def package_collector(qapp):
    """The package's GUI-thread garbage collector, as the app runs one (app/gui_gc.py)."""
    from app.gui_gc import GuiThreadCollector

    collector = GuiThreadCollector()  # as the app does: Qt objects die on the GUI thread
    collector.start()
    yield collector
    collector.stop()


@pytest.fixture(scope="package")
def qloop(qapp, package_collector):
    """A qasync loop marked running over the QApplication (DESIGN.md); undone after the
    package so that other test packages can use asyncio.run."""
    from qasync import QEventLoop

    loop = QEventLoop(qapp, already_running=True)  # also marks it as the running loop
    asyncio.set_event_loop(loop)
    use_loop(loop)
    yield loop
    use_loop(None)
    executor = getattr(loop, "_QEventLoop__default_executor", None)
    if executor is not None:  # Engine.stop joins its thread through it: end its QThreads
        executor.shutdown(wait=True)
    asyncio.events._set_running_loop(None)
    asyncio.set_event_loop(None)


@pytest.fixture(autouse=True)
def _running_loop(qloop):
    """The qasync loop is the running loop during each app test and only then: the engine's
    tests, which may run in the same process afterwards, call asyncio.run()."""
    asyncio.events._set_running_loop(qloop)
    yield
    asyncio.events._set_running_loop(None)


@pytest.fixture
def data_dir(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "data"
    monkeypatch.setenv("TANDEM_DATA_DIR", str(folder))
    return folder


@pytest.fixture
def store(data_dir):
    from app.paths import database_path
    from app.store.conversation_store import Store

    s = Store(database_path())
    yield s
    s.close()


@pytest.fixture
def fake_engine(qloop):
    from fake_engine import FakeEngine

    return FakeEngine()


@pytest.fixture
def fake_bridge(fake_engine, qloop):
    from app.engine_bridge import EngineBridge

    bridge = EngineBridge(fake_engine)
    bridge.start()
    spin(lambda: bridge.model_info is not None, 5)
    yield bridge
    bridge.close()


@pytest.fixture(scope="package")
def real_engine(qloop):
    """The real default model, loaded once for the whole package."""
    from engine.api import Engine, EngineConfig

    eng = Engine(EngineConfig(model=None))
    asyncio.events._set_running_loop(qloop)  # set up before the per-test _running_loop
    eng.start()
    info = run(eng.wait_ready(), timeout=REAL_MODEL_LOAD_TIMEOUT_S)
    print(f"\nreal engine ready: {info.name}, {info.parameters} parameters, {info.dtype}")
    yield eng
    run(eng.stop(), timeout=60)


@pytest.fixture
def real_bridge(real_engine):
    from app.engine_bridge import EngineBridge

    bridge = EngineBridge(real_engine)
    bridge.start()
    assert spin(lambda: bridge.model_info is not None, 60)
    yield bridge
    bridge.close()


@pytest.fixture
def window(store, fake_bridge):
    w = make_window(store, fake_bridge)
    yield w
    close_window(w)


@pytest.fixture
def real_window(store, real_bridge):
    w = make_window(store, real_bridge)
    yield w
    close_window(w)
