"""The Qt model of saved conversations (the sidebar's list), filled from the store's search."""

from __future__ import annotations

import enum
from typing import Any

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, Qt

from app.formatting import fmt_when
from app.store.records import ConversationSummary

_Index = QModelIndex | QPersistentModelIndex


class ConversationRoles(enum.IntEnum):
    SUMMARY = Qt.ItemDataRole.UserRole + 1
    ID = Qt.ItemDataRole.UserRole + 2
    SUBTITLE = Qt.ItemDataRole.UserRole + 3


class ConversationListModel(QAbstractListModel):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._rows: list[ConversationSummary] = []

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self._rows)

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        summary = self._rows[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return summary.title
        if role == Qt.ItemDataRole.ToolTipRole:
            return summary.snippet or summary.title
        if role == ConversationRoles.SUMMARY:
            return summary
        if role == ConversationRoles.ID:
            return summary.id
        if role == ConversationRoles.SUBTITLE:
            if summary.snippet:
                return summary.snippet
            count = summary.message_count
            return f"{count} message{'s' if count != 1 else ''} · {fmt_when(summary.updated)}"
        return None

    def set_rows(self, rows: list[ConversationSummary]) -> None:
        self.beginResetModel()
        self._rows = list(rows)
        self.endResetModel()

    def rows(self) -> list[ConversationSummary]:
        return list(self._rows)

    def row_of(self, conversation_id: int) -> int:
        for row, summary in enumerate(self._rows):
            if summary.id == conversation_id:
                return row
        return -1
