"""The Qt model of saved conversations (the sidebar's list), filled from the store's search;
which chats are open in a tab and which are writing a reply come from the window."""

from __future__ import annotations

import enum
from typing import Any

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, Qt, Signal

from app.formatting import fmt_when
from app.store.records import ConversationSummary

_Index = QModelIndex | QPersistentModelIndex


class ConversationRoles(enum.IntEnum):
    SUMMARY = Qt.ItemDataRole.UserRole + 1
    ID = Qt.ItemDataRole.UserRole + 2
    SUBTITLE = Qt.ItemDataRole.UserRole + 3
    GENERATING = Qt.ItemDataRole.UserRole + 4
    SNIPPET_MARKS = Qt.ItemDataRole.UserRole + 5  # [start, end) of matched words in SUBTITLE


class ConversationListModel(QAbstractListModel):
    """One row per saved chat; editing a row's title asks for a rename (`renameRequested`)."""

    renameRequested = Signal(int, str)  # conversation id, new title

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._rows: list[ConversationSummary] = []
        self._generating: set[int] = set()

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self._rows)

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        summary = self._rows[index.row()]
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.EditRole):
            return summary.title
        if role == Qt.ItemDataRole.ToolTipRole:
            return summary.first_line or summary.title
        if role == ConversationRoles.SUMMARY:
            return summary
        if role == ConversationRoles.ID:
            return summary.id
        if role == ConversationRoles.GENERATING:
            return summary.id in self._generating
        if role == ConversationRoles.SNIPPET_MARKS:
            return summary.snippet_marks if summary.snippet else ()
        if role == ConversationRoles.SUBTITLE:
            if summary.snippet:
                return summary.snippet
            if summary.id in self._generating:
                return "Writing a reply…"
            count = summary.message_count
            return f"{count} message{'s' if count != 1 else ''} · {fmt_when(summary.updated)}"
        return None

    def flags(self, index: _Index) -> Qt.ItemFlag:
        return super().flags(index) | Qt.ItemFlag.ItemIsEditable

    def setData(self, index: _Index, value: Any, role: int = Qt.ItemDataRole.EditRole) -> bool:
        if role != Qt.ItemDataRole.EditRole or not index.isValid():
            return False
        title = str(value).strip()
        summary = self._rows[index.row()]
        if title and title != summary.title:
            self.renameRequested.emit(summary.id, title)
        return bool(title)

    def set_rows(self, rows: list[ConversationSummary]) -> None:
        self.beginResetModel()
        self._rows = list(rows)
        self.endResetModel()

    def set_generating(self, conversation_ids: set[int]) -> None:
        """The chats whose reply is being written (marked apart from the merely open ones)."""
        if conversation_ids != self._generating:
            self._generating = set(conversation_ids)
            if self._rows:
                self.dataChanged.emit(self.index(0, 0), self.index(len(self._rows) - 1, 0))

    def rows(self) -> list[ConversationSummary]:
        return list(self._rows)

    def row_of(self, conversation_id: int) -> int:
        for row, summary in enumerate(self._rows):
            if summary.id == conversation_id:
                return row
        return -1
