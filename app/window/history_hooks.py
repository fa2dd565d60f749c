"""The window's side of the chat history features: a fork opens in a tab, a message too long for
its chat starts a new one, the sidebar renames chats, opens search hits at the matched message and
marks the chats writing a reply; export of every chat; the damaged-database notice at start."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QMessageBox

from app.chat.chat_tab import ChatTab
from app.sidebar.export_dialogs import export_all_dialog
from app.store.records import Conversation

if TYPE_CHECKING:
    from app.window.main_window import MainWindow


class HistoryHooks(QObject):
    """Joins the chat tabs, the sidebar and the store for the history features."""

    def __init__(self, window: MainWindow) -> None:
        super().__init__(window)
        self._window = window
        window.sidebar.renameRequested.connect(self.rename)
        window.sidebar.revealRequested.connect(self.reveal)

    def attach(self, tab: ChatTab) -> None:
        """Wire one new chat tab."""
        controller = tab.controller
        controller.forked.connect(self.open_fork)
        controller.busyChanged.connect(self.mark_generating)
        controller.historyChanged.connect(self._window.sidebar.refresh)
        tab.newChatRequested.connect(lambda text, t=tab: self.new_chat_with(t, text))

    # -- chats ---------------------------------------------------------------------------------

    def open_fork(self, conversation: Conversation) -> None:
        self._window.open_conversation(conversation.id)
        self._window.status.show_message(f"New chat from here: “{conversation.title}”")

    def new_chat_with(self, source: ChatTab, text: str) -> ChatTab:
        """A new chat with the source chat's settings and system prompt, sending `text`."""
        tab = self._window.new_chat()
        tab.controller.set_settings(source.controller.settings)
        tab.controller.set_system_prompt(source.controller.conversation.system_prompt)
        tab.system_prompt.setText(source.controller.conversation.system_prompt)
        tab.send(text)
        return tab

    def rename(self, conversation_id: int, title: str) -> None:
        for tab in self._window.chat_tabs():
            if tab.controller.conversation.id == conversation_id:
                tab.controller.rename(title)
                break
        else:
            self._window.store.rename_conversation(conversation_id, title)
        self._window.sidebar.refresh()

    def reveal(self, conversation_id: int, message_id: int) -> None:
        tab = self._window.open_conversation(conversation_id)
        if tab is not None:
            tab.reveal(message_id)

    def mark_generating(self) -> None:
        busy = {t.controller.conversation.id for t in self._window.chat_tabs() if t.controller.busy}
        self._window.sidebar.set_generating(busy)

    # -- export ---------------------------------------------------------------------

    def export_all(self) -> None:
        export_all_dialog(self._window, self._window.store, self._exported_all)

    def _exported_all(self, paths: list[Path]) -> None:
        where = paths[0].parent if paths else "nowhere (no chats)"
        self._window.status.show_message(f"Exported {len(paths)} chats to {where}")

    # -- start ---------------------------------------------------------------------------------

    def show_damage(self) -> QMessageBox | None:
        """Say that the database was damaged, where it went and what was saved."""
        report = self._window.store.damaged
        if report is None:
            return None
        self._window.status.show_message(report.message, error=True)
        box = QMessageBox(
            QMessageBox.Icon.Warning,
            "Conversation database repaired",
            report.message,
            QMessageBox.StandardButton.Ok,
            self._window,
        )
        box.finished.connect(lambda _result: box.deleteLater())
        box.open()
        return box
