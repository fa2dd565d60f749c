"""What the user does to a whole conversation from the menus or the sidebar: export it to
Markdown, delete it (after asking)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from app.store.conversation_store import Store
from app.store.export import to_markdown
from app.window.status_bar import EngineStatusBar
from app.window.tab_controller import TabController

DELETE_TEXT = "Delete"


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
        conversation = self._store.conversation(conversation_id)
        text = to_markdown(conversation, self._store.messages(conversation_id))
        path = Path(path)
        path.write_text(text, encoding="utf-8")
        self._status.show_message(f"Exported to {path}")
        return path

    def export_dialog(self, conversation_id: int | None = None) -> QFileDialog | None:
        if conversation_id is None:
            controller = self._tabs.current_controller()
            if controller is None:
                return None
            conversation_id = controller.conversation.id
        conversation = self._store.conversation(conversation_id)
        name = "".join(c if c.isalnum() or c in " -_" else "_" for c in conversation.title).strip()
        dialog = QFileDialog(self._window, "Export chat to Markdown", f"{name or 'chat'}.md")
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        dialog.setNameFilter("Markdown (*.md)")
        dialog.fileSelected.connect(lambda path: self.export(conversation_id, path))
        dialog.open()
        return dialog

    def delete(self, conversation_id: int, *, confirm: bool = True) -> None:
        if confirm:
            box = QMessageBox(
                QMessageBox.Icon.Question,
                "Delete chat",
                "Delete this chat and all its messages? This cannot be undone.",
                QMessageBox.StandardButton.Cancel,
                self._window,
            )
            box.addButton(DELETE_TEXT, QMessageBox.ButtonRole.DestructiveRole)

            def clicked(button) -> None:
                if box.buttonRole(button) == QMessageBox.ButtonRole.DestructiveRole:
                    self.delete(conversation_id, confirm=False)

            box.buttonClicked.connect(clicked)
            box.finished.connect(lambda _result: box.deleteLater())
            box.open()
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
