"""One message in the chat: who wrote it, its status, its rendered text and its actions (copy,
edit a user message, regenerate the last reply)."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QFont, QGuiApplication
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.chat.message_body import MessageBody, make_options
from app.formatting import reply_meta
from app.store.records import Message, MessageStatus, Role
from app.theme import Theme

ROLE_NAMES = {Role.USER: "You", Role.ASSISTANT: "Tandem"}
STATUS_TEXT = {
    MessageStatus.GENERATING: "writing…",
    MessageStatus.INTERRUPTED: "interrupted",
    MessageStatus.STOPPED: "stopped",
    MessageStatus.ERROR: "error",
}
COPIED_FEEDBACK_MS = 1200
EDITOR_MIN_HEIGHT = 72


class MessageBubble(QFrame):
    editSubmitted = Signal(str)
    regenerateRequested = Signal()

    def __init__(self, message: Message, *, theme: Theme, font: QFont, parent=None) -> None:
        super().__init__(parent)
        self._message = message
        self._theme = theme
        self._font = font
        self._highlight = False
        self._can_regenerate = False
        self._busy = False
        user = message.role is Role.USER
        self.setObjectName("UserBubble" if user else "AssistantBubble")
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)

        self.role_label = QLabel(ROLE_NAMES[message.role])
        self.role_label.setObjectName("RoleLabel")
        self.status_badge = QLabel()
        self.status_badge.setObjectName("StatusBadge")
        self.meta_label = QLabel()
        self.meta_label.setObjectName("MetaLabel")
        self.copy_button = self._action("Copy", "Copy the message as Markdown", self._copy)
        self.edit_button = self._action("Edit", "Edit and send again from here", self._start_edit)
        self.regenerate_button = self._action(
            "Regenerate", "Write this reply again", self.regenerateRequested.emit
        )
        self.edit_button.setVisible(user)
        self.regenerate_button.setVisible(False)

        header = QHBoxLayout()
        header.setContentsMargins(0, 0, 0, 0)
        header.setSpacing(6)
        header.addWidget(self.role_label)
        header.addWidget(self.status_badge)
        header.addStretch(1)
        header.addWidget(self.meta_label)
        for button in (self.copy_button, self.edit_button, self.regenerate_button):
            header.addWidget(button)

        self.body = MessageBody()
        self.error_label = QLabel()
        self.error_label.setObjectName("ErrorLabel")
        self.error_label.setWordWrap(True)
        self.error_label.setVisible(False)

        self._editor = QPlainTextEdit()
        self._editor.setMinimumHeight(EDITOR_MIN_HEIGHT)
        self._editor.setVisible(False)
        self._edit_bar = QWidget()
        bar = QHBoxLayout(self._edit_bar)
        bar.setContentsMargins(0, 0, 0, 0)
        bar.addStretch(1)
        cancel = QPushButton("Cancel")
        cancel.clicked.connect(self._cancel_edit)
        self._save_button = QPushButton("Send")
        self._save_button.setObjectName("PrimaryButton")
        self._save_button.clicked.connect(self._submit_edit)
        bar.addWidget(cancel)
        bar.addWidget(self._save_button)
        self._edit_bar.setVisible(False)

        layout = QVBoxLayout(self)
        margin = (14, 10, 14, 10) if user else (2, 6, 2, 6)
        layout.setContentsMargins(*margin)
        layout.setSpacing(4)
        layout.addLayout(header)
        layout.addWidget(self.body)
        layout.addWidget(self._editor)
        layout.addWidget(self._edit_bar)
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

    def set_actions(self, *, can_regenerate: bool, busy: bool) -> None:
        self._can_regenerate, self._busy = can_regenerate, busy
        self._refresh_actions()

    def is_editing(self) -> bool:
        return self._editor.isVisible()

    # -- editing -------------------------------------------------------------------------------

    def _start_edit(self) -> None:
        self._editor.setPlainText(self._message.content)
        self.body.setVisible(False)
        self._editor.setVisible(True)
        self._edit_bar.setVisible(True)
        self._editor.setFocus()

    def _cancel_edit(self) -> None:
        self._editor.setVisible(False)
        self._edit_bar.setVisible(False)
        self.body.setVisible(True)

    def _submit_edit(self) -> None:
        text = self._editor.toPlainText().strip()
        if not text:
            return
        self._cancel_edit()
        self.editSubmitted.emit(text)

    # -- internals -----------------------------------------------------------------------------

    def _action(self, text: str, tip: str, slot) -> QToolButton:
        button = QToolButton()
        button.setObjectName("MessageAction")
        button.setText(text)
        button.setToolTip(tip)
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.clicked.connect(slot)
        return button

    def _copy(self) -> None:
        QGuiApplication.clipboard().setText(self._message.content)
        self.copy_button.setText("Copied")
        QTimer.singleShot(COPIED_FEEDBACK_MS, lambda: self.copy_button.setText("Copy"))

    def _refresh(self) -> None:
        message = self._message
        status_text = STATUS_TEXT.get(message.status, "")
        self.status_badge.setText(status_text)
        self.status_badge.setVisible(bool(status_text))
        self.status_badge.setProperty("status", message.status.value)
        self.status_badge.style().unpolish(self.status_badge)
        self.status_badge.style().polish(self.status_badge)
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
        self.body.setVisible(bool(text) and not self._editor.isVisible())
        self._refresh_actions()

    def _refresh_actions(self) -> None:
        generating = self._message.status is MessageStatus.GENERATING
        self.copy_button.setEnabled(bool(self._message.content))
        self.edit_button.setEnabled(not self._busy)
        self.regenerate_button.setVisible(self._can_regenerate and not generating)
        self.regenerate_button.setEnabled(not self._busy)
