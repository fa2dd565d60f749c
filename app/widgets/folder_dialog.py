"""A dialog that asks for a folder (modal to its window only) and hands the path to a callback.

It opens where the last folder was picked (beside it: the next model is likely its sibling),
else in the home folder, never in the folder the app happened to be started from."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QWidget

_last_parent: str | None = None  # where the last picked folder lies (this session)


def start_folder() -> str:
    """Where the next folder dialog opens."""
    if _last_parent is not None and Path(_last_parent).is_dir():
        return _last_parent
    return str(Path.home())


def open_folder_dialog(parent: QWidget, title: str, chosen: Callable[[str], object]) -> QFileDialog:
    """Open it without blocking (`open()`, not `exec()`); `chosen(path)` once a folder is picked."""
    dialog = QFileDialog(parent, title)
    dialog.setFileMode(QFileDialog.FileMode.Directory)
    dialog.setDirectory(start_folder())
    dialog.fileSelected.connect(_remember)
    dialog.fileSelected.connect(chosen)
    dialog.open()
    return dialog


def _remember(path: str) -> None:
    global _last_parent
    if path:
        _last_parent = str(Path(path).parent)
