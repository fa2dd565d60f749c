"""The sidebar of saved conversations: search by text, open, export to Markdown, delete."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QRectF, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QFont, QFontMetrics, QPainter
from PySide6.QtWidgets import (
    QLineEdit,
    QListView,
    QMenu,
    QPushButton,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QVBoxLayout,
    QWidget,
)

from app.sidebar.conversation_model import ConversationListModel, ConversationRoles
from app.store.conversation_store import Store
from app.theme import current_theme

SEARCH_DEBOUNCE_MS = 150
ROW_HEIGHT = 52


class ConversationDelegate(QStyledItemDelegate):
    """Two lines per conversation: the title, and the matched text or its size and age."""

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex) -> QSize:
        return QSize(option.rect.width(), ROW_HEIGHT)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex) -> None:
        theme = current_theme()
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        rect = QRectF(option.rect).adjusted(6, 2, -6, -2)
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        hover = bool(option.state & QStyle.StateFlag.State_MouseOver)
        if selected or hover:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(theme.color("accent_soft" if selected else "sunken"))
            painter.drawRoundedRect(rect, 8, 8)
        summary = index.data(ConversationRoles.SUMMARY)
        text_rect = rect.adjusted(12, 7, -10, -7)
        title_font = QFont(option.font)
        title_font.setWeight(QFont.Weight.DemiBold)
        painter.setFont(title_font)
        painter.setPen(theme.color("text"))
        metrics = QFontMetrics(title_font)
        title = metrics.elidedText(
            summary.title, Qt.TextElideMode.ElideRight, int(text_rect.width() - 14)
        )
        painter.drawText(text_rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop, title)
        if summary.is_open:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(theme.color("accent"))
            painter.drawEllipse(QRectF(text_rect.right() - 6, text_rect.top() + 5, 6, 6))
        sub_font = QFont(option.font)
        sub_font.setPointSizeF(option.font.pointSizeF() * 0.9)
        painter.setFont(sub_font)
        painter.setPen(theme.color("text_muted"))
        sub = QFontMetrics(sub_font).elidedText(
            index.data(ConversationRoles.SUBTITLE) or "",
            Qt.TextElideMode.ElideRight,
            int(text_rect.width()),
        )
        painter.drawText(text_rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignBottom, sub)
        painter.restore()


class ConversationSidebar(QWidget):
    openRequested = Signal(int)
    exportRequested = Signal(int)
    deleteRequested = Signal(int)
    newRequested = Signal()

    def __init__(self, store: Store, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("DockBody")
        self._store = store
        self.model = ConversationListModel(self)

        self.new_button = QPushButton("+  New chat")
        self.new_button.setObjectName("PrimaryButton")
        self.new_button.setToolTip("New chat (Ctrl+T)")
        self.new_button.clicked.connect(self.newRequested)
        self.search = QLineEdit()
        self.search.setObjectName("SearchBox")
        self.search.setPlaceholderText("Search conversations")
        self.search.setClearButtonEnabled(True)
        self.list = QListView()
        self.list.setObjectName("ConversationList")
        self.list.setModel(self.model)
        self.list.setItemDelegate(ConversationDelegate(self.list))
        self.list.setMouseTracking(True)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setUniformItemSizes(True)
        self.list.setEditTriggers(QListView.EditTrigger.NoEditTriggers)
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
        self.model.set_rows(self._store.list_conversations(self.search.text()))

    def _activated(self, index: QModelIndex) -> None:
        if index.isValid():
            self.openRequested.emit(index.data(ConversationRoles.ID))

    def _menu(self, pos) -> None:
        index = self.list.indexAt(pos)
        if not index.isValid():
            return
        conversation_id = index.data(ConversationRoles.ID)
        menu = QMenu(self)
        menu.addAction("Open", lambda: self.openRequested.emit(conversation_id))
        menu.addAction("Export to Markdown…", lambda: self.exportRequested.emit(conversation_id))
        menu.addSeparator()
        menu.addAction("Delete…", lambda: self.deleteRequested.emit(conversation_id))
        menu.popup(self.list.viewport().mapToGlobal(pos))
