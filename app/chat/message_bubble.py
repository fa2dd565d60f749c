"""One message in the chat: who wrote it, its status, which version it is, its rendered text and
its actions (copy, edit, regenerate, continue, new chat from here, delete; for a queued message:
send now, cancel)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QFont, QGuiApplication
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
)

from app.chat.message_actions import DEFAULT_SPACING, MessageActions
from app.chat.message_body import MessageBody, make_options
from app.chat.message_editor import MessageEditor
from app.chat.version_switcher import VersionSwitcher
from app.formatting import reply_meta
from app.store.records import Message, MessageStatus, Role
from app.theme import Theme
from app.widgets.elided_label import ElidedLabel

ROLE_NAMES = {Role.USER: "You", Role.ASSISTANT: "Tandem"}
STATUS_TEXT = {
    MessageStatus.GENERATING: "writing…",
    MessageStatus.INTERRUPTED: "interrupted",
    MessageStatus.STOPPED: "stopped",
    MessageStatus.ERROR: "error",
    MessageStatus.QUEUED: "queued",
}
CUT_TEXT = "cut at max tokens"
COPIED_FEEDBACK_MS = 1200


class MessageBubble(QFrame):
    """The widget of one row of the message list."""

    editSubmitted = Signal(str)
    regenerateRequested = Signal()
    continueRequested = Signal()
    versionRequested = Signal(int)  # -1 / +1
    forkRequested = Signal()
    deleteRequested = Signal()
    sendQueuedRequested = Signal()

    def __init__(self, message: Message, *, theme: Theme, font: QFont, parent=None) -> None:
        super().__init__(parent)
        self._message = message
        self._theme = theme
        self._font = font
        self._highlight = False
        self._can_regenerate = False
        self._can_continue = False
        self._busy = False
        user = message.role is Role.USER
        self.setObjectName("UserBubble" if user else "AssistantBubble")
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)

        self.role_label = QLabel(ROLE_NAMES[message.role])
        self.role_label.setObjectName("RoleLabel")
        self.versions = VersionSwitcher()
        self.versions.stepRequested.connect(self.versionRequested)
        self.status_badge = QLabel()
        self.status_badge.setObjectName("StatusBadge")
        for label in (self.role_label, self.status_badge):  # the stats, not they, take the room
            label.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Fixed)
        self.meta_label = ElidedLabel()  # shortened before the header outgrows the column
        self.meta_label.setObjectName("MetaLabel")
        self.meta_label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.copy_button = self._action("Copy", "Copy the message as Markdown", self._copy)
        self.edit_button = self._action(
            "Edit", "Edit and send as a new version (the old one is kept)", self._start_edit
        )
        self.regenerate_button = self._action(
            "Regenerate", "Write a new version of this reply", self.regenerateRequested.emit
        )
        self.continue_button = self._action(
            "Continue", "Write on where this reply stopped", self.continueRequested.emit
        )
        self.continue_button.setObjectName("ContinueAction")
        self.send_now_button = self._action(
            "Send now", "Send this queued message", self.sendQueuedRequested.emit
        )
        self.cancel_button = self._action(
            "Cancel", "Take this message out of the queue", self.deleteRequested.emit
        )
        self.more_button = self._more_menu()

        self.action_row = MessageActions(  # on the header's line, or on a line of its own
            [
                self.continue_button,
                self.send_now_button,
                self.cancel_button,
                self.copy_button,
                self.edit_button,
                self.regenerate_button,
            ],
            self.more_button,
            overflow_order=[
                self.edit_button,
                self.regenerate_button,
                self.copy_button,
                self.cancel_button,
                self.continue_button,
                self.send_now_button,
            ],
            on_hint_change=self._place_actions,
        )
        header = self._header = QHBoxLayout()
        header.setContentsMargins(0, 0, 0, 0)
        header.setSpacing(DEFAULT_SPACING)
        header.addWidget(self.role_label)
        header.addWidget(self.versions)
        header.addWidget(self.status_badge)
        header.addWidget(self.meta_label, 1)
        header.addStretch(0)  # keeps who wrote it and the badges on the left when no stats
        header.addWidget(self.action_row)
        self._actions_line = QHBoxLayout()
        self._actions_line.setContentsMargins(0, 0, 0, 0)

        self.body = MessageBody()
        self.error_label = QLabel()
        self.error_label.setObjectName("ErrorLabel")
        self.error_label.setWordWrap(True)
        self.error_label.setVisible(False)
        self.editor = MessageEditor()
        self.editor.setVisible(False)
        self.editor.saved.connect(self._submit_edit)
        self.editor.cancelled.connect(self._end_edit)

        layout = QVBoxLayout(self)
        margin = (14, 10, 14, 10) if user else (2, 6, 2, 6)
        layout.setContentsMargins(*margin)
        layout.setSpacing(4)
        layout.addLayout(header)
        layout.addLayout(self._actions_line)
        layout.addWidget(self.body)
        layout.addWidget(self.editor)
        layout.addWidget(self.error_label)
        self._refresh()

    # -- updates from the view -----------------------------------------------------------------

    @property
    def message(self) -> Message:
        return self._message

    def set_message(self, message: Message) -> None:
        self._message = message
        self._refresh()

    def set_theme(self, theme: Theme, font: QFont) -> None:
        self._theme, self._font = theme, font
        self._refresh()

    def set_highlight_drafts(self, on: bool) -> None:
        if on != self._highlight:
            self._highlight = on
            self._refresh()

    def set_actions(self, *, can_regenerate: bool, can_continue: bool, busy: bool) -> None:
        self._can_regenerate, self._can_continue, self._busy = can_regenerate, can_continue, busy
        self._refresh_actions()

    def is_editing(self) -> bool:
        return self.editor.isVisible()

    def badge_text(self) -> str:
        return "" if self.status_badge.isHidden() else self.status_badge.text()

    # -- editing -------------------------------------------------------------------------------

    def _start_edit(self) -> None:
        self.body.setVisible(False)
        self.editor.start(self._message.content)
        self._refresh_actions()

    def _end_edit(self) -> None:
        self.editor.setVisible(False)
        self.body.setVisible(bool(self._message.content))
        self._refresh_actions()

    def _submit_edit(self, text: str) -> None:
        self._end_edit()
        if text != self._message.content:
            self.editSubmitted.emit(text)

    # -- internals -----------------------------------------------------------------------------

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._place_actions()

    def event(self, event) -> bool:
        if event.type() == QEvent.Type.LayoutRequest:  # a part of the header changed its size
            self._place_actions()
        return super().event(event)

    def _place_actions(self) -> None:
        """The actions share the header's line while it has room for all of them next to who
        wrote the message and its badges (the stats shorten first), else take a line of their
        own, where those that still do not fit fold into the "⋯" menu: they never make the
        message wider than its column, and no button is ever squeezed."""
        left, _, right, _ = self.layout().getContentsMargins()
        room = self.contentsRect().width() - left - right
        fixed = [w for w in (self.role_label, self.versions, self.status_badge) if not w.isHidden()]
        gaps = len(fixed) + (0 if self.meta_label.isHidden() else 1)
        need = sum(w.sizeHint().width() for w in fixed) + DEFAULT_SPACING * gaps
        fits = need + self.action_row.full_width() <= room
        self.action_row.fit(room)
        if fits == (self._header.indexOf(self.action_row) >= 0):
            return
        (self._actions_line if fits else self._header).removeWidget(self.action_row)
        (self._header if fits else self._actions_line).addWidget(self.action_row)

    def _action(self, text: str, tip: str, slot) -> QToolButton:
        button = QToolButton()
        button.setObjectName("MessageAction")
        button.setText(text)
        button.setToolTip(tip)
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.clicked.connect(slot)
        return button

    def _more_menu(self) -> QToolButton:
        button = QToolButton()
        button.setObjectName("MessageAction")
        button.setText("⋯")
        button.setToolTip("More")
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        button.setStyleSheet("QToolButton::menu-indicator { image: none; width: 0; }")
        menu = QMenu(button)
        self.fork_action = menu.addAction("New chat from here", self.forkRequested.emit)
        self.delete_action = menu.addAction("Delete message", self.deleteRequested.emit)
        button.setMenu(menu)
        return button

    def _copy(self) -> None:
        QGuiApplication.clipboard().setText(self._message.content)
        self.copy_button.setText("Copied")
        QTimer.singleShot(
            COPIED_FEEDBACK_MS, self.copy_button, lambda: self.copy_button.setText("Copy")
        )

    def _refresh(self) -> None:
        message = self._message
        cut = message.cut_at_max_tokens
        status_text = CUT_TEXT if cut else STATUS_TEXT.get(message.status, "")
        self.status_badge.setText(status_text)
        self.status_badge.setVisible(bool(status_text))
        self.status_badge.setProperty("status", "cut" if cut else message.status.value)
        self.status_badge.style().unpolish(self.status_badge)
        self.status_badge.style().polish(self.status_badge)
        self.setProperty("queued", message.status is MessageStatus.QUEUED)
        self.style().unpolish(self)
        self.style().polish(self)
        meta = reply_meta(message.stats) if message.role is Role.ASSISTANT else ""
        self.meta_label.setText(meta)
        self.meta_label.setVisible(bool(meta))
        self.error_label.setText(message.error or "")
        self.error_label.setVisible(bool(message.error))
        text = message.content
        if not text and message.status is MessageStatus.GENERATING:
            text = "…"
        self.body.set_content(
            text,
            options=make_options(
                self._theme,
                self._font,
                plain=message.role is Role.USER,
                draft_spans=message.draft_spans,
                highlight_drafts=self._highlight,
            ),
        )
        self.body.setVisible(bool(text) and not self.editor.isVisible())
        self._refresh_actions()

    def _refresh_actions(self) -> None:
        message = self._message
        generating = message.status is MessageStatus.GENERATING
        queued = message.status is MessageStatus.QUEUED
        sent = not queued
        editing = not self.editor.isHidden()
        index, count = message.version
        self.versions.set_version(index, count, enabled=not self._busy)
        self.copy_button.setEnabled(bool(message.content))
        self.edit_button.setEnabled(not self._busy)
        self.regenerate_button.setEnabled(not self._busy)
        self.action_row.set_wanted(
            {
                self.copy_button: not editing,
                self.edit_button: sent and message.role is Role.USER and not editing,
                self.regenerate_button: self._can_regenerate and not generating,
                self.continue_button: self._can_continue and not self._busy,
                self.send_now_button: queued and not self._busy,
                self.cancel_button: queued,
                self.more_button: sent and not generating and not editing,
            }
        )
        self.fork_action.setEnabled(not generating)
        self.delete_action.setEnabled(not self._busy)
        self._place_actions()
