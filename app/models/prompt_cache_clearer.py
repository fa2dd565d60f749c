"""Clearing the engine's prompt cache: ask first, then clear (RAM and disk) and say how much
was freed. One instance serves the live panel and the Models window."""

from __future__ import annotations

import asyncio

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QMessageBox, QWidget

from app.engine_bridge import EngineBridge
from app.formatting import fmt_bytes

CLEAR_TEXT = "Clear"


class PromptCacheClearer(QObject):
    """Confirms, clears through the bridge, and reports `cleared(bytes)` or `failed(message)`."""

    cleared = Signal(int)  # bytes freed
    failed = Signal(str)  # a sentence for the user

    def __init__(self, bridge: EngineBridge, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._bridge = bridge
        self._task: asyncio.Task | None = None
        self.box: QMessageBox | None = None  # the open confirmation, if any

    @property
    def busy(self) -> bool:
        return self._task is not None and not self._task.done()

    def ask(self, parent: QWidget | None = None) -> QMessageBox:
        """Open the confirmation (window-modal; never exec() under qasync)."""
        disk = self._bridge.stats().cache.disk_bytes
        box = QMessageBox(
            QMessageBox.Icon.Question,
            "Clear prompt cache",
            "Delete every cached prompt, in memory and on disk?",
            QMessageBox.StandardButton.Cancel,
            parent,
        )
        box.setInformativeText(
            f"{fmt_bytes(disk)} on disk. Chats keep their messages; their next reply reads "
            "its prompt again, which takes longer once."
        )
        box.addButton(CLEAR_TEXT, QMessageBox.ButtonRole.DestructiveRole)

        def clicked(button) -> None:
            if box.buttonRole(button) == QMessageBox.ButtonRole.DestructiveRole:
                self.clear()

        box.buttonClicked.connect(clicked)
        box.finished.connect(lambda _result: self._forget(box))
        self.box = box
        box.open()
        return box

    def clear(self) -> asyncio.Task:
        """Clear now, without asking."""
        if not self.busy:
            self._task = asyncio.ensure_future(self._clear())
        return self._task

    async def _clear(self) -> None:
        try:
            freed = await self._bridge.clear_prompt_cache()
        except Exception as exc:  # noqa: BLE001 - shown to the user
            self.failed.emit(f"Could not clear the prompt cache: {exc or type(exc).__name__}")
            return
        self.cleared.emit(freed)

    def _forget(self, box: QMessageBox) -> None:
        if self.box is box:
            self.box = None
        box.deleteLater()
