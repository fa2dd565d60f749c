"""The message list's view: one MessageBubble per row of a MessageListModel, in a scrolling
column of readable width that follows the newest text while the user is at the bottom."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QHBoxLayout, QLabel, QScrollArea, QVBoxLayout, QWidget

from app.chat.message_bubble import MessageBubble
from app.chat.message_model import MessageListModel, MessageRoles
from app.store.records import MessageStatus, Role
from app.theme import Theme, current_theme, theme_manager, ui_font

DEFAULT_COLUMN_WIDTH = 820
DEFAULT_USER_BUBBLE_FRACTION = 0.8
STICK_TO_BOTTOM_PX = 48
MESSAGE_FONT_POINTS = 10.5


class MessageListView(QScrollArea):
    """The view of a MessageListModel; its signals carry the model row they are about."""

    editSubmitted = Signal(int, str)  # row, new text
    regenerateRequested = Signal(int)  # row of the reply to write again
    continueRequested = Signal(int)  # row of the reply to write on
    versionRequested = Signal(int, int)  # row, step (-1 / +1)
    forkRequested = Signal(int)  # row: a new chat with the messages down to it
    deleteRequested = Signal(int)  # row (a queued row: take it out of the queue)
    sendQueuedRequested = Signal(int)  # row of a queued message

    def __init__(self, parent=None, *, column_width: int = DEFAULT_COLUMN_WIDTH) -> None:
        super().__init__(parent)
        self.setObjectName("MessageView")
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFrameShape(QScrollArea.Shape.NoFrame)
        self._model: MessageListModel | None = None
        self._rows: list[QWidget] = []  # one row widget per message, holding its bubble
        self._bubbles: list[MessageBubble] = []
        self._highlight = False
        self._busy = False
        self._stick = True
        self._theme = current_theme()
        self._font = ui_font(MESSAGE_FONT_POINTS)

        viewport = QWidget()
        viewport.setObjectName("MessageViewport")
        outer = QHBoxLayout(viewport)
        outer.setContentsMargins(24, 16, 24, 16)
        outer.addStretch(1)
        self._column = QWidget()
        self._column.setMaximumWidth(column_width)
        self._layout = QVBoxLayout(self._column)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(14)
        self._layout.addStretch(1)
        self._empty = self._make_empty_state()
        self._layout.insertWidget(0, self._empty)
        outer.addWidget(self._column, 100)
        outer.addStretch(1)
        self.setWidget(viewport)

        bar = self.verticalScrollBar()
        bar.rangeChanged.connect(self._range_changed)
        bar.valueChanged.connect(self._value_changed)
        theme_manager().changed.connect(self._theme_changed)

    # -- model ---------------------------------------------------------------------------------

    def setModel(self, model: MessageListModel) -> None:
        if self._model is not None:
            for signal, slot in (
                (self._model.modelReset, self._reset),
                (self._model.rowsInserted, self._rows_inserted),
                (self._model.rowsRemoved, self._rows_removed),
                (self._model.dataChanged, self._data_changed),
            ):
                signal.disconnect(slot)
        self._model = model
        model.modelReset.connect(self._reset)
        model.rowsInserted.connect(self._rows_inserted)
        model.rowsRemoved.connect(self._rows_removed)
        model.dataChanged.connect(self._data_changed)
        self._reset()

    def model(self) -> MessageListModel | None:
        return self._model

    def bubble(self, row: int) -> MessageBubble:
        return self._bubbles[row]

    def bubbles(self) -> list[MessageBubble]:
        return list(self._bubbles)

    def set_highlight_drafts(self, on: bool) -> None:
        self._highlight = on
        for bubble in self._bubbles:
            bubble.set_highlight_drafts(on)

    def set_busy(self, busy: bool) -> None:
        self._busy = busy
        self._refresh_actions()

    def scroll_to_row(self, row: int) -> None:
        """Bring the message at `row` into view (and stop following the newest text)."""
        if 0 <= row < len(self._rows):
            self._stick = False
            self.widget().adjustSize()
            self.ensureWidgetVisible(self._rows[row], 0, 40)

    def scroll_to_bottom(self) -> None:
        self._stick = True
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())

    # -- model signals -------------------------------------------------------------------------

    def _reset(self) -> None:
        for row in self._rows:
            self._layout.removeWidget(row)
            row.deleteLater()
        self._rows.clear()
        self._bubbles.clear()
        if self._model is not None and self._model.rowCount():
            self._rows_inserted(QModelIndex(), 0, self._model.rowCount() - 1)
        self._update_empty()
        self.scroll_to_bottom()

    def _rows_inserted(self, _parent: QModelIndex, first: int, last: int) -> None:
        for row in range(first, last + 1):
            message = self._model.index(row, 0).data(MessageRoles.MESSAGE)
            bubble = MessageBubble(message, theme=self._theme, font=self._font)
            bubble.set_highlight_drafts(self._highlight)
            self._connect(bubble)
            holder = self._wrap(bubble, message.role)
            # +1: the empty-state label sits first in the layout
            self._layout.insertWidget(row + 1, holder)
            self._rows.insert(row, holder)
            self._bubbles.insert(row, bubble)
        self._update_empty()
        self._refresh_actions()

    def _rows_removed(self, _parent: QModelIndex, first: int, last: int) -> None:
        for row in range(last, first - 1, -1):
            holder = self._rows.pop(row)
            self._bubbles.pop(row)
            self._layout.removeWidget(holder)
            holder.deleteLater()
        self._update_empty()
        self._refresh_actions()

    def _data_changed(self, top: QModelIndex, bottom: QModelIndex, _roles=()) -> None:
        for row in range(top.row(), bottom.row() + 1):
            if 0 <= row < len(self._bubbles):
                self._bubbles[row].set_message(self._model.index(row, 0).data(MessageRoles.MESSAGE))
        self._refresh_actions()

    # -- internals -----------------------------------------------------------------------------

    def _wrap(self, bubble: MessageBubble, role: Role) -> QWidget:
        holder = QWidget()
        layout = QHBoxLayout(holder)
        layout.setContentsMargins(0, 0, 0, 0)
        if role is Role.USER:
            layout.addStretch(int(100 * (1 - DEFAULT_USER_BUBBLE_FRACTION)))
            layout.addWidget(bubble, int(100 * DEFAULT_USER_BUBBLE_FRACTION))
        else:
            layout.addWidget(bubble)
        return holder

    def _connect(self, bubble: MessageBubble) -> None:
        """The bubble's signals, as this view's signals with the bubble's row."""

        def row_of(b=bubble) -> int:
            return self._bubbles.index(b) if b in self._bubbles else -1

        def forward(signal, *args) -> None:
            row = row_of()
            if row >= 0:
                signal.emit(row, *args)

        bubble.editSubmitted.connect(lambda text: forward(self.editSubmitted, text))
        bubble.regenerateRequested.connect(lambda: forward(self.regenerateRequested))
        bubble.continueRequested.connect(lambda: forward(self.continueRequested))
        bubble.versionRequested.connect(lambda step: forward(self.versionRequested, step))
        bubble.forkRequested.connect(lambda: forward(self.forkRequested))
        bubble.deleteRequested.connect(lambda: forward(self.deleteRequested))
        bubble.sendQueuedRequested.connect(lambda: forward(self.sendQueuedRequested))

    def _refresh_actions(self) -> None:
        sent = [b for b in self._bubbles if b.message.status is not MessageStatus.QUEUED]
        last_reply = -1
        for row, bubble in enumerate(sent):
            if bubble.message.role is Role.ASSISTANT:
                last_reply = row
        for row, bubble in enumerate(self._bubbles):
            can_continue = row == len(sent) - 1 and bubble.message.continuable
            bubble.set_actions(
                can_regenerate=row == last_reply, can_continue=can_continue, busy=self._busy
            )

    def _make_empty_state(self) -> QWidget:
        box = QWidget()
        layout = QVBoxLayout(box)
        layout.setContentsMargins(0, 80, 0, 0)
        title = QLabel("Start a conversation")
        title.setObjectName("EmptyTitle")
        font = QFont(title.font())
        font.setPointSizeF(font.pointSizeF() * 1.4)
        title.setFont(font)
        hint = QLabel("Enter sends · Shift+Enter adds a line · Esc stops a reply")
        hint.setObjectName("EmptyHint")
        for label in (title, hint):
            label.setAlignment(Qt.AlignmentFlag.AlignHCenter)
            layout.addWidget(label)
        return box

    def _update_empty(self) -> None:
        self._empty.setVisible(not self._bubbles)

    def _range_changed(self, _low: int, high: int) -> None:
        if self._stick:
            self.verticalScrollBar().setValue(high)

    def _value_changed(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self._stick = value >= bar.maximum() - STICK_TO_BOTTOM_PX

    def _theme_changed(self, theme: Theme) -> None:
        self._theme = theme
        for bubble in self._bubbles:
            bubble.set_theme(theme, self._font)
