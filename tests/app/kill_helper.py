"""Run by test_app_kill: the real app (window, store, engine with the default model) sends one
prompt and prints what the reply bubble shows each time it changes, until it is killed.

    python tests/app/kill_helper.py DATA_DIR PROMPT MAX_TOKENS
"""

from __future__ import annotations

import asyncio
import json
import os
import sys


def main() -> None:
    data_dir, prompt, max_tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
    os.environ["TANDEM_DATA_DIR"] = data_dir
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    import engine  # noqa: F401 - OpenBLAS before MLX
    from app.qt_compat import protect_singleton_refcounts

    protect_singleton_refcounts()
    from PySide6.QtWidgets import QApplication
    from qasync import QEventLoop

    from app.engine_bridge import EngineBridge
    from app.paths import database_path
    from app.settings.chat_settings import ChatSettings
    from app.store.conversation_store import Store
    from app.window.main_window import MainWindow
    from engine.api import EngineConfig

    qapp = QApplication([])
    loop = QEventLoop(qapp)
    asyncio.set_event_loop(loop)
    store = Store(database_path())
    bridge = EngineBridge(config=EngineConfig(model=None))
    window = MainWindow(store, bridge)
    window.show()
    tab = window.current_tab()
    tab.controller.set_settings(ChatSettings(max_tokens=max_tokens, temperature=0.0))
    view = tab.view

    def changed(top, _bottom, _roles=()):
        bubble = view.bubble(top.row())
        if bubble.message.role.value == "assistant":
            print("SHOWN " + json.dumps(bubble.body.text()), flush=True)

    tab.controller.model.dataChanged.connect(changed)

    async def run() -> None:
        bridge.start()
        await bridge.engine.wait_ready()
        print("READY", flush=True)
        tab.send(prompt)
        while True:
            await asyncio.sleep(1)

    with loop:
        loop.run_until_complete(run())


if __name__ == "__main__":
    main()
