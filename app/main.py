"""Tandem's entry point: `python -m app` or the `tandem` gui-script.

Builds the QApplication, the qasync loop, the store, the engine bridge and the main window; runs
until the last window closes; then stops the replies (their text is stored) and the engine.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

import engine  # noqa: F401 - interposes OpenBLAS before anything loads MLX
from app.paths import DATA_DIR_ENV, data_dir, database_path
from app.platform_check import EXIT_NO_WINDOW, window_problem
from app.qt_compat import protect_singleton_refcounts

APP_DISPLAY_NAME = "Tandem"
MODEL_KEY = "model"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="tandem",
        description="Chat with local MLX models.",
        epilog="`tandem serve --help`: serve a model over an OpenAI-compatible API, no window.",
    )
    parser.add_argument(
        "--version", action=VersionAction, help="print the version and what it runs on, then quit"
    )
    parser.add_argument(
        "--model", help="a model folder or Hugging Face repo id (default: last used)"
    )
    parser.add_argument("--data-dir", help=f"where conversations are kept (or ${DATA_DIR_ENV})")
    parser.add_argument("--theme", choices=("system", "light", "dark"), help="colour theme")
    parser.add_argument("--verbose", action="store_true", help="log more")
    parser.add_argument(
        "--quit-when-ready",
        action="store_true",
        help="start, load the model, print its name and quit (a smoke test for packaging)",
    )
    parser.add_argument(
        "--ready-file",
        metavar="PATH",
        help="write the model's name to PATH once the window is up and the model loaded",
    )
    return parser.parse_args(argv)


class VersionAction(argparse.Action):
    """--version: computed only when asked (it reads package metadata and imports Qt's core)."""

    def __init__(self, option_strings, dest, **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from app.version import version_report

        print(version_report(), flush=True)
        parser.exit()


def write_ready_file(path: Path, model_name: str) -> None:
    """Write the file whole (through a rename), so a reader never sees it half-written."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(model_name + "\n")
    os.replace(partial, path)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:  # headless: the server never imports Qt
        from server.cli import main as serve

        return serve(argv[1:])
    args = parse_args(argv)
    problem = window_problem()  # before Qt, which would abort naming one missing library
    if problem:
        print(problem, file=sys.stderr, flush=True)
        return EXIT_NO_WINDOW
    protect_singleton_refcounts()  # also when `app` was imported as a namespace package
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.data_dir:
        os.environ[DATA_DIR_ENV] = args.data_dir

    from PySide6.QtWidgets import QApplication
    from qasync import QEventLoop

    from app.engine_bridge import EngineBridge
    from app.gui_gc import GuiThreadCollector
    from app.models.mtp_weights import engine_mtp_weights
    from app.single_instance import SingleInstance
    from app.store.conversation_store import Store
    from app.theme import app_icon, theme_manager, ui_font
    from app.window.main_window import MainWindow
    from engine.api import EngineConfig

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName(APP_DISPLAY_NAME)
    app.setApplicationDisplayName(APP_DISPLAY_NAME)
    app.setOrganizationName("Tandem")
    app.setDesktopFileName("tandem")
    app.setWindowIcon(app_icon())
    app.setFont(ui_font())
    app.setQuitOnLastWindowClosed(False)

    # one Tandem per data folder: a second one would mark the first's live replies interrupted
    folder = data_dir()
    instance = SingleInstance(folder)
    if not instance.acquire():
        reached = instance.activate_owner()
        owner = instance.owner_pid()
        print(
            f"Tandem is already running with the data folder {folder}"
            + (f" (process {owner})" if owner else "")
            + ("; its window was brought to the front." if reached else "."),
            flush=True,
        )
        return 0
    loop = QEventLoop(app)
    asyncio.set_event_loop(loop)
    collector = GuiThreadCollector(parent=app)  # Qt objects in cycles die on this thread
    collector.start()

    store = Store(database_path())
    if args.theme:
        store.set_setting("theme_mode", args.theme)
    theme_manager().apply(store.setting("theme_mode", "system"))
    model = args.model if args.model is not None else store.setting(MODEL_KEY)
    mtp_weights = engine_mtp_weights(store)
    bridge = EngineBridge(config=EngineConfig(model=model or None, mtp_weights=mtp_weights))
    window = MainWindow(store, bridge)
    instance.activateRequested.connect(window.bring_to_front)
    bridge.modelLoaded.connect(lambda _info: store.set_setting(MODEL_KEY, bridge.model_spec))
    bridge.modelRemoved.connect(lambda _info, _why: collector.collect())
    first_failure = {"pending": model is not None and args.model is None}

    def load_failed(message: str) -> None:
        # the model remembered from last time is gone: fall back to the built-in one
        if first_failure["pending"] and bridge.model_info is None:
            first_failure["pending"] = False
            window.status.show_message(
                f"{message} — loading the built-in model instead", error=True
            )
            bridge.request_default(None)

    bridge.loadFailed.connect(load_failed)
    window.show()

    closed = asyncio.Event()
    app.lastWindowClosed.connect(closed.set)
    # Ctrl+C in the terminal closes the window cleanly (the qasync loop runs Python often
    # enough for the handler: the stats poll ticks every 250 ms)
    signal.signal(signal.SIGINT, lambda *_: app.closeAllWindows())

    def ready(info) -> None:
        if args.ready_file:
            write_ready_file(Path(args.ready_file), info.name)
        if args.quit_when_ready:
            print(f"ready: {info.name} ({info.dtype}, {info.parameters:,} parameters)", flush=True)
            app.closeAllWindows()

    bridge.modelLoaded.connect(ready)
    outcome = {"failed": False}

    def failed(message: str) -> None:
        if args.quit_when_ready:
            outcome["failed"] = True
            print(f"failed: {message}", flush=True)
            app.closeAllWindows()

    bridge.loadFailed.connect(failed)

    async def run() -> None:
        bridge.start()
        await closed.wait()
        await window.shutdown()
        await bridge.stop()

    with loop:
        loop.run_until_complete(run())
    collector.stop()  # the MLX thread has ended
    store.close()
    instance.release()
    return 1 if outcome["failed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
