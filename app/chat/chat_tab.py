"""One chat tab: system prompt, message list and composer, wired to its ChatController."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.chat.chat_controller import ChatController
from app.chat.message_view import MessageListView
from app.chat.prompt_input import PromptInput
from app.settings.chat_settings import ChatSettings

COMPOSER_MAX_WIDTH = 868


class ChatTab(QWidget):
    titleChanged = Signal(str)

    def __init__(self, controller: ChatController, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("ChatTab")
        self.controller = controller

        self.system_prompt = QLineEdit(controller.conversation.system_prompt)
        self.system_prompt.setObjectName("SystemPrompt")
        self.system_prompt.setPlaceholderText("System prompt for this chat (optional)")
        self.system_prompt.setClearButtonEnabled(True)
        self.system_prompt.editingFinished.connect(
            lambda: controller.set_system_prompt(self.system_prompt.text())
        )

        self.view = MessageListView()
        self.view.setModel(controller.model)
        self.view.editSubmitted.connect(controller.edit)
        self.view.regenerateRequested.connect(controller.regenerate)

        self.input = PromptInput()
        self.input.submitted.connect(self._submit)
        self.send_button = QPushButton("Send")
        self.send_button.setObjectName("PrimaryButton")
        self.send_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.send_button.clicked.connect(self._send_or_stop)
        self.regenerate_button = QToolButton()
        self.regenerate_button.setText("↻  Regenerate")
        self.regenerate_button.setToolTip("Write the last reply again")
        self.regenerate_button.clicked.connect(lambda: controller.regenerate())
        self.spec_label = QLabel()
        self.spec_label.setObjectName("Hint")

        composer = QFrame()
        composer.setObjectName("Composer")
        composer.setMaximumWidth(COMPOSER_MAX_WIDTH)
        self._composer = composer
        inner = QVBoxLayout(composer)
        inner.setContentsMargins(12, 8, 8, 8)
        inner.setSpacing(4)
        inner.addWidget(self.input)
        row = QHBoxLayout()
        row.setSpacing(6)
        row.addWidget(self.spec_label)
        row.addStretch(1)
        row.addWidget(self.regenerate_button)
        row.addWidget(self.send_button)
        inner.addLayout(row)
        self.input.installEventFilter(self)

        top = QHBoxLayout()
        top.setContentsMargins(24, 10, 24, 0)
        top.addStretch(1)
        self.system_prompt.setMaximumWidth(COMPOSER_MAX_WIDTH)
        top.addWidget(self.system_prompt, 100)
        top.addStretch(1)

        bottom = QFrame()
        bottom.setObjectName("ComposerBar")
        bottom_layout = QHBoxLayout(bottom)
        bottom_layout.setContentsMargins(24, 6, 24, 16)
        bottom_layout.addStretch(1)
        bottom_layout.addWidget(composer, 100)
        bottom_layout.addStretch(1)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(top)
        layout.addWidget(self.view, 1)
        layout.addWidget(bottom)

        controller.busyChanged.connect(self._busy_changed)
        controller.titleChanged.connect(self.titleChanged)
        controller.settingsChanged.connect(self._settings_changed)
        self._busy_changed()
        self._settings_changed(controller.settings)

    # -- actions -------------------------------------------------------------------------------

    def send(self, text: str) -> bool:
        """Send `text` as if typed (used by tests and tools)."""
        self.input.setPlainText(text)
        return self._submit_from_input()

    def stop(self) -> None:
        self.controller.stop()

    def focus_input(self) -> None:
        self.input.setFocus()

    def set_highlight_drafts(self, on: bool) -> None:
        self.view.set_highlight_drafts(on)

    def _submit(self, text: str) -> None:
        if not self.controller.send(text):
            self.input.setPlainText(text)  # busy: keep what was typed

    def _submit_from_input(self) -> bool:
        text = self.input.toPlainText().strip()
        if not text or self.controller.busy:
            return False
        self.input.clear()
        return self.controller.send(text)

    def _send_or_stop(self) -> None:
        if self.controller.busy:
            self.controller.stop()
        else:
            self.input.submit()

    # -- state ---------------------------------------------------------------------------------

    def _busy_changed(self) -> None:
        busy = self.controller.busy
        self.send_button.setText("Stop" if busy else "Send")
        self.send_button.setObjectName("StopButton" if busy else "PrimaryButton")
        self.send_button.setToolTip("Stop the reply (Esc)" if busy else "Send (Enter)")
        self.send_button.style().unpolish(self.send_button)
        self.send_button.style().polish(self.send_button)
        has_reply = any(m.role.value == "assistant" for m in self.controller.model.messages())
        self.regenerate_button.setEnabled(not busy and has_reply)
        self.view.set_busy(busy)

    def _settings_changed(self, settings: ChatSettings) -> None:
        self.spec_label.setText(f"Speculation: {settings.describe_speculation()}")

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.input and event.type() in (QEvent.Type.FocusIn, QEvent.Type.FocusOut):
            self._composer.setProperty("focused", event.type() == QEvent.Type.FocusIn)
            self._composer.style().unpolish(self._composer)
            self._composer.style().polish(self._composer)
        return super().eventFilter(watched, event)
