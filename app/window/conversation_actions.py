"""What the user does to a whole conversation from the menus or the sidebar: export it to
Markdown, delete it (after asking)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog, QWidget

from app.sidebar.delete_confirmation import confirm_delete
from app.sidebar.export_dialogs import export_chat_dialog
from app.store.conversation_store import Store
from app.store.export import export_chat
from app.window.status_bar import EngineStatusBar
from app.window.tab_controller import TabController


class ConversationActions(QObject):
    """Export and delete, for the current chat or any saved one."""

    deleted = Signal(int)  # conversation id

    def __init__(
        self,
        window: QWidget,
        *,
        store: Store,
        tabs: TabController,
        status: EngineStatusBar,
    ) -> None:
        super().__init__(window)
        self._window = window
        self._store = store
        self._tabs = tabs
        self._status = status

    def export(self, conversation_id: int, path: str | Path) -> Path:
        path = export_chat(self._store, conversation_id, path)
        self._status.show_message(f"Exported to {path}")
        return path

    def export_dialog(self, conversation_id: int | None = None) -> QFileDialog | None:
        """Ask where to save a chat (in the documents folder first)."""
        if conversation_id is None:
            controller = self._tabs.current_controller()
            if controller is None:
                return None
            conversation_id = controller.conversation.id
        return export_chat_dialog(
            self._window,
            self._store,
            conversation_id,
            lambda path: self._status.show_message(f"Exported to {path}"),
        )

    def delete(self, conversation_id: int, *, confirm: bool = True) -> None:
        if confirm:
            conversation = self._store.conversation(conversation_id)
            if conversation is not None:
                confirm_delete(
                    self._window,
                    conversation.title,
                    self._store.message_count(conversation_id),
                    lambda: self.delete(conversation_id, confirm=False),
                )
            return
        tab = self._tabs.find(conversation_id)
        if tab is not None:
            self._tabs.close_tab(self._tabs.tabs.indexOf(tab))
        self._store.delete_conversation(conversation_id)
        self.deleted.emit(conversation_id)

    def delete_current(self) -> None:
        controller = self._tabs.current_controller()
        if controller is not None:
            self.delete(controller.conversation.id)
