"""A dialog that asks for a folder (modal to its window only) and hands the path to a callback."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QFileDialog, QWidget


def open_folder_dialog(parent: QWidget, title: str, chosen: Callable[[str], object]) -> QFileDialog:
    """Open it without blocking (`open()`, not `exec()`); `chosen(path)` once a folder is picked."""
    dialog = QFileDialog(parent, title)
    dialog.setFileMode(QFileDialog.FileMode.Directory)
    dialog.fileSelected.connect(chosen)
    dialog.open()
    return dialog
