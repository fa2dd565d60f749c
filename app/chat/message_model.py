"""The Qt model of one chat's messages: a QAbstractListModel over `records.Message`."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, Qt

from app.store.records import Message, MessageStatus

_Index = QModelIndex | QPersistentModelIndex


class MessageRoles(enum.IntEnum):
    MESSAGE = Qt.ItemDataRole.UserRole + 1  # the whole records.Message
    ROLE = Qt.ItemDataRole.UserRole + 2
    CONTENT = Qt.ItemDataRole.UserRole + 3
    STATUS = Qt.ItemDataRole.UserRole + 4
    DRAFT_SPANS = Qt.ItemDataRole.UserRole + 5
    STATS = Qt.ItemDataRole.UserRole + 6
    ERROR = Qt.ItemDataRole.UserRole + 7
    VERSION = Qt.ItemDataRole.UserRole + 8  # (index, count) among the versions at its place


class MessageListModel(QAbstractListModel):
    """The branch on screen, then the queued messages (status "queued", not yet stored)."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._messages: list[Message] = []

    # -- QAbstractListModel --------------------------------------------------------------------

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self._messages)

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._messages):
            return None
        message = self._messages[index.row()]
        if role in (Qt.ItemDataRole.DisplayRole, MessageRoles.CONTENT):
            return message.content
        if role == MessageRoles.MESSAGE:
            return message
        if role == MessageRoles.ROLE:
            return message.role.value
        if role == MessageRoles.STATUS:
            return message.status.value
        if role == MessageRoles.DRAFT_SPANS:
            return list(message.draft_spans)
        if role == MessageRoles.STATS:
            return message.stats
        if role == MessageRoles.ERROR:
            return message.error
        if role == MessageRoles.VERSION:
            return message.version
        return None

    def roleNames(self) -> dict[int, bytes]:
        names = {role.value: role.name.lower().encode() for role in MessageRoles}
        names[Qt.ItemDataRole.DisplayRole] = b"display"
        return names

    # -- editing -------------------------------------------------------------------------------

    def set_messages(self, messages: list[Message]) -> None:
        self.beginResetModel()
        self._messages = list(messages)
        self.endResetModel()

    def append(self, message: Message) -> int:
        row = len(self._messages)
        self.beginInsertRows(QModelIndex(), row, row)
        self._messages.append(message)
        self.endInsertRows()
        return row

    def update(self, row: int, **changes: Any) -> None:
        """Change fields of the message at `row` (content, status, draft_spans, stats, error)."""
        message = self._messages[row]
        self._messages[row] = dataclasses.replace(message, **changes)
        index = self.index(row, 0)
        self.dataChanged.emit(index, index)

    def insert(self, row: int, message: Message) -> None:
        self.beginInsertRows(QModelIndex(), row, row)
        self._messages.insert(row, message)
        self.endInsertRows()

    def remove(self, row: int) -> Message:
        self.beginRemoveRows(QModelIndex(), row, row)
        message = self._messages.pop(row)
        self.endRemoveRows()
        return message

    def remove_from(self, row: int) -> None:
        """Remove the message at `row` and every later one."""
        if row >= len(self._messages):
            return
        self.beginRemoveRows(QModelIndex(), row, len(self._messages) - 1)
        del self._messages[row:]
        self.endRemoveRows()

    def replace_from(self, row: int, messages: list[Message]) -> None:
        """Show `messages` from `row` on, in place of what was there (another branch)."""
        self.remove_from(row)
        if messages:
            self.beginInsertRows(QModelIndex(), row, row + len(messages) - 1)
            self._messages[row:] = list(messages)
            self.endInsertRows()

    # -- reading -------------------------------------------------------------------------------

    def message(self, row: int) -> Message:
        return self._messages[row]

    def messages(self) -> list[Message]:
        return list(self._messages)

    def row_of(self, message_id: int) -> int:
        for row, message in enumerate(self._messages):
            if message.id == message_id:
                return row
        return -1

    def last_row(self) -> int:
        return len(self._messages) - 1

    def sent(self) -> list[Message]:
        """The branch on screen, without the queued messages."""
        return [m for m in self._messages if m.status is not MessageStatus.QUEUED]

    def queued_rows(self) -> list[int]:
        return [r for r, m in enumerate(self._messages) if m.status is MessageStatus.QUEUED]

    def is_generating(self) -> bool:
        return any(m.status is MessageStatus.GENERATING for m in self._messages)
