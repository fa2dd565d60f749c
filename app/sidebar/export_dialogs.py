"""The export dialogs: one chat to a Markdown file, or every chat into a folder; both open in
the user's documents folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QWidget

from app.store.conversation_store import Store
from app.store.export import documents_dir, export_all, export_chat, file_name


def export_chat_dialog(
    parent: QWidget, store: Store, conversation_id: int, done: Callable[[Path], None]
) -> QFileDialog:
    """Ask where to save one chat; `done(path)` once written."""
    conversation = store.conversation(conversation_id)
    start = documents_dir() / file_name(conversation.title)
    dialog = QFileDialog(parent, "Export chat to Markdown", str(start))
    dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
    dialog.setNameFilter("Markdown (*.md)")
    dialog.setDefaultSuffix("md")
    dialog.fileSelected.connect(lambda path: done(export_chat(store, conversation_id, path)))
    dialog.open()
    return dialog


def export_all_dialog(
    parent: QWidget, store: Store, done: Callable[[list[Path]], None]
) -> QFileDialog:
    """Ask for a folder; every chat goes into a new dated folder inside it."""
    dialog = QFileDialog(parent, "Export all chats to Markdown", str(documents_dir()))
    dialog.setFileMode(QFileDialog.FileMode.Directory)
    dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
    dialog.fileSelected.connect(lambda folder: done(export_all(store, folder)))
    dialog.open()
    return dialog
