"""The sidebar of saved conversations: full-text search, open (at the matched message), rename,
pin, export to Markdown, delete."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, Qt, QTimer, Signal
from PySide6.QtWidgets import QLineEdit, QListView, QMenu, QPushButton, QVBoxLayout, QWidget

from app.sidebar.conversation_delegate import ConversationDelegate
from app.sidebar.conversation_model import ConversationListModel, ConversationRoles
from app.store.conversation_store import Store

SEARCH_DEBOUNCE_MS = 150


class ConversationSidebar(QWidget):
    """The list of chats that have a message, pinned first."""

    openRequested = Signal(int)
    revealRequested = Signal(int, int)  # conversation id, message id: a search hit to show
    renameRequested = Signal(int, str)
    exportRequested = Signal(int)
    deleteRequested = Signal(int)
    newRequested = Signal()

    def __init__(self, store: Store, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("DockBody")
        self._store = store
        self.model = ConversationListModel(self)
        self.model.renameRequested.connect(self.renameRequested)

        self.new_button = QPushButton("+  New chat")
        self.new_button.setObjectName("PrimaryButton")
        self.new_button.setToolTip("New chat (Ctrl+T)")
        self.new_button.clicked.connect(self.newRequested)
        self.search = QLineEdit()
        self.search.setObjectName("SearchBox")
        self.search.setPlaceholderText("Search all messages")
        self.search.setClearButtonEnabled(True)
        self.list = QListView()
        self.list.setObjectName("ConversationList")
        self.list.setModel(self.model)
        self.list.setItemDelegate(ConversationDelegate(self.list))
        self.list.setMouseTracking(True)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setUniformItemSizes(True)
        self.list.setEditTriggers(QListView.EditTrigger.EditKeyPressed)  # F2; or the menu
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._menu)
        self.list.activated.connect(self._activated)
        self.list.clicked.connect(self._activated)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 4, 6, 10)
        layout.setSpacing(8)
        layout.addWidget(self.new_button)
        layout.addWidget(self.search)
        layout.addWidget(self.list, 1)

        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(SEARCH_DEBOUNCE_MS)
        self._debounce.timeout.connect(self.refresh)
        self.search.textChanged.connect(lambda _text: self._debounce.start())
        self.refresh()

    def refresh(self) -> None:
        if self.list.state() == QListView.State.EditingState:
            return  # a rename is being typed: the list follows once it is done
        self.model.set_rows(self._store.list_conversations(self.search.text()))

    def set_generating(self, conversation_ids: set[int]) -> None:
        self.model.set_generating(conversation_ids)

    def rename(self, conversation_id: int) -> None:
        """Edit the title of a chat in place."""
        row = self.model.row_of(conversation_id)
        if row >= 0:
            index = self.model.index(row, 0)
            self.list.setCurrentIndex(index)
            self.list.edit(index)

    def toggle_pin(self, conversation_id: int) -> None:
        summary = self._summary(conversation_id)
        if summary is not None:
            self._store.set_pinned(conversation_id, not summary.pinned)
            self.refresh()

    def _summary(self, conversation_id: int):
        row = self.model.row_of(conversation_id)
        return self.model.rows()[row] if row >= 0 else None

    def _activated(self, index: QModelIndex) -> None:
        if not index.isValid():
            return
        summary = index.data(ConversationRoles.SUMMARY)
        self.openRequested.emit(summary.id)
        if summary.snippet and summary.hit_message_id is not None:
            self.revealRequested.emit(summary.id, summary.hit_message_id)

    def _menu(self, pos) -> None:
        index = self.list.indexAt(pos)
        if not index.isValid():
            return
        summary = index.data(ConversationRoles.SUMMARY)
        chat = summary.id
        menu = QMenu(self)
        menu.addAction("Open", lambda: self._activated(index))
        menu.addAction("Rename…", lambda: self.rename(chat))
        menu.addAction("Unpin" if summary.pinned else "Pin", lambda: self.toggle_pin(chat))
        menu.addSeparator()
        menu.addAction("Export to Markdown…", lambda: self.exportRequested.emit(chat))
        menu.addSeparator()
        menu.addAction("Delete…", lambda: self.deleteRequested.emit(chat))
        menu.popup(self.list.viewport().mapToGlobal(pos))
