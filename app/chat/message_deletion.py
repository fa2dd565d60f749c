"""Deleting one message, undoably: a QUndoCommand that hides the message in the store (the
conversation tree keeps it) and shows a sibling version in its place if it has one."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtGui import QUndoCommand

from app.store.conversation_store import Store
from app.store.records import Message

PREVIEW_CHARS = 40


class DeleteMessage(QUndoCommand):
    """Hide one message; undo shows it again, on the branch that was on screen."""

    def __init__(
        self, store: Store, message: Message, leaf: int | None, on_change: Callable[[], None]
    ) -> None:
        preview = " ".join(message.content.split())
        if len(preview) > PREVIEW_CHARS:
            preview = preview[: PREVIEW_CHARS - 1] + "…"
        super().__init__(f"Delete “{preview}”" if preview else "Delete message")
        self._store = store
        self._message = message
        self._leaf = leaf  # the branch on screen before the deletion
        self._on_change = on_change

    def redo(self) -> None:
        message = self._message
        self._store.set_hidden(message.id, True)
        others = [i for i in message.siblings if i != message.id]
        if others:  # another version takes its place: the nearest one
            at = message.siblings.index(message.id)
            nearest = min(others, key=lambda i: abs(message.siblings.index(i) - at))
            self._store.show_version(message.conversation_id, nearest)
        self._on_change()

    def undo(self) -> None:
        self._store.set_hidden(self._message.id, False)
        if self._leaf is not None:
            self._store.show_version(self._message.conversation_id, self._leaf)
        self._on_change()
