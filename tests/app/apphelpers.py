"""Helpers for the app's tests (a distinct module name: conftest.py files of other test
folders must not shadow it)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

REAL_MODEL_LOAD_TIMEOUT_S = 600.0
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"


_loop: asyncio.AbstractEventLoop | None = None


def use_loop(loop: asyncio.AbstractEventLoop | None) -> None:
    """The qasync loop that `spin` and `run` drive (None: no app loop any more)."""
    global _loop
    _loop = loop


def spin(predicate, timeout: float, *, step_ms: int = 10) -> bool:
    """Process Qt (and so qasync) events until `predicate()` or the timeout; True if it held.
    The qasync loop counts as running meanwhile, as it would inside the app."""
    from PySide6.QtTest import QTest

    previous = asyncio.events._get_running_loop()
    if _loop is not None:
        asyncio.events._set_running_loop(_loop)
    try:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                return False
            QTest.qWait(step_ms)
        return True
    finally:
        asyncio.events._set_running_loop(previous)


def run(coro, timeout: float = 60.0):
    """Run a coroutine on the qasync loop from a test and return its result."""
    task = asyncio.ensure_future(coro, loop=_loop)
    if not spin(task.done, timeout):
        task.cancel()
        raise TimeoutError(f"{coro!r} did not finish in {timeout} s")
    return task.result()


def make_window(store, bridge, *, theme: str = "light"):
    from app.theme import theme_manager
    from app.window.main_window import MainWindow

    store.set_setting("theme_mode", theme)
    window = MainWindow(store, bridge)
    theme_manager().apply(theme)
    window.show()
    return window


def close_window(window) -> None:
    run(window.shutdown(), timeout=30)
    window.close()
    window.deleteLater()
    spin(lambda: False, 0.05)
