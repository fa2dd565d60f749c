"""Asking before a whole chat is deleted, by its name and size."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QMessageBox, QWidget

DELETE_TEXT = "Delete"


def delete_question(title: str, message_count: int) -> str:
    """ "Delete “Trip to Lisbon” and its 14 messages?" """
    if message_count == 0:
        return f"Delete “{title}”?"
    noun = "message" if message_count == 1 else "messages"
    return f"Delete “{title}” and its {message_count} {noun}?"


def confirm_delete(
    parent: QWidget, title: str, message_count: int, on_delete: Callable[[], None]
) -> QMessageBox:
    """Open (not exec) a question box; `on_delete` runs if the user confirms."""
    box = QMessageBox(
        QMessageBox.Icon.Question,
        "Delete chat",
        delete_question(title, message_count),
        QMessageBox.StandardButton.Cancel,
        parent,
    )
    box.setInformativeText("This cannot be undone.")
    box.addButton(DELETE_TEXT, QMessageBox.ButtonRole.DestructiveRole)

    def clicked(button) -> None:
        if box.buttonRole(button) == QMessageBox.ButtonRole.DestructiveRole:
            on_delete()

    box.buttonClicked.connect(clicked)
    box.finished.connect(lambda _result: box.deleteLater())
    box.open()
    return box
