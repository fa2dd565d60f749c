"""Messages typed while a reply is being written: shown as "queued" rows after it, kept in the
store (nothing typed is lost), and sent one by one, in order, when the reply ends."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from app.chat.message_model import MessageListModel
from app.store.conversation_store import Store
from app.store.records import Conversation, Message, MessageStatus, Role


class PromptQueue(QObject):
    """The queue of one chat; its rows are the last rows of the chat's message model."""

    changed = Signal()

    def __init__(
        self,
        conversation: Conversation,
        *,
        store: Store,
        model: MessageListModel,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._conversation = conversation
        self._store = store
        self._model = model

    def __len__(self) -> int:
        return len(self._model.queued_rows())

    def texts(self) -> list[str]:
        return [self._model.message(row).content for row in self._model.queued_rows()]

    def rows(self) -> list[Message]:
        """Queued rows as the model shows them (to put back after the branch changes)."""
        return [self._model.message(row) for row in self._model.queued_rows()]

    def restore(self) -> None:
        """Show the queue kept in the store (the app closed before it was sent)."""
        for text in self._conversation.queue:
            self._model.append(_queued(text))

    def push(self, text: str) -> None:
        self._model.append(_queued(text))
        self._save()

    def take(self, row: int | None = None) -> str | None:
        """Remove the queued message at model row `row` (default: the first) and return its
        text."""
        rows = self._model.queued_rows()
        row = rows[0] if row is None and rows else row
        if row not in rows:
            return None
        text = self._model.remove(row).content
        self._save()
        return text

    def cancel(self, row: int) -> bool:
        """Drop the queued message at model row `row`."""
        if row not in self._model.queued_rows():
            return False
        self._model.remove(row)
        self._save()
        return True

    def _save(self) -> None:
        texts = self.texts()
        self._conversation.queue = texts
        self._store.set_queue(self._conversation.id, texts)
        self.changed.emit()


def _queued(text: str) -> Message:
    return Message(role=Role.USER, content=text, status=MessageStatus.QUEUED)
