"""One chat tab: system prompt, message list, notices and composer, wired to its ChatController.

Enter while a reply is being written queues the message; a message that will not fit in the
model's context is held back with an offer to start a new chat with it."""

from __future__ import annotations

import asyncio

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.chat.chat_controller import ChatController
from app.chat.context_budget import Fit
from app.chat.context_meter import ContextMeter
from app.chat.message_view import MessageListView
from app.chat.notice_bar import NoticeBar
from app.chat.prompt_input import PLACEHOLDER, PromptInput
from app.settings.chat_settings import ChatSettings
from app.store.records import Role

COMPOSER_MAX_WIDTH = 868
UNDO_NOTICE_MS = 10_000
BUSY_PLACEHOLDER = "Enter queues your message; it is sent when the reply ends"


class ChatTab(QWidget):
    """The widgets of one chat."""

    titleChanged = Signal(str)
    newChatRequested = Signal(str)  # text that did not fit here: send it in a new chat

    def __init__(self, controller: ChatController, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("ChatTab")
        self.controller = controller
        self._tasks: set[asyncio.Task] = set()
        self._overflow_text = ""
        self._undo_index = 0
        self._loading = ""  # what the reply waits for while its model loads

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
        self.view.continueRequested.connect(controller.continue_reply)
        self.view.versionRequested.connect(controller.switch_version)
        self.view.forkRequested.connect(controller.fork)
        self.view.deleteRequested.connect(controller.delete_message)
        self.view.sendQueuedRequested.connect(controller.send_queued)

        self.input = PromptInput()
        self.input.submitted.connect(self._submit)
        self.input.textChanged.connect(self._text_changed)
        self.send_button = QPushButton("Send")
        self.send_button.setObjectName("PrimaryButton")
        self.send_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.send_button.clicked.connect(self._send_or_stop)
        self.regenerate_button = QToolButton()
        self.regenerate_button.setText("↻")  # an icon, so a narrow window keeps its chat wide
        self.regenerate_button.setAccessibleName("Regenerate")
        self.regenerate_button.setToolTip(
            "Regenerate: write a new version of the last reply (Ctrl+Shift+R)"
        )
        self.regenerate_button.clicked.connect(lambda: controller.regenerate())
        self.spec_label = QLabel()
        self.spec_label.setObjectName("Hint")
        self.context_meter = ContextMeter(controller.budget)

        self.undo_bar = NoticeBar(kind="info")
        self.undo_bar.acted.connect(controller.undo)
        self.overflow_bar = NoticeBar(kind="warning")
        self.overflow_bar.acted.connect(self._new_chat_with_overflow)

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
        # the hint is the first thing a narrow window drops (its width never holds the row open)
        self.spec_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        row.addWidget(self.spec_label, 1)
        row.addWidget(self.context_meter)
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
        column = QVBoxLayout()
        column.setSpacing(6)
        for widget in (self.undo_bar, self.overflow_bar, composer):
            widget.setMaximumWidth(COMPOSER_MAX_WIDTH)
            column.addWidget(widget)
        bottom_layout = QHBoxLayout(bottom)
        bottom_layout.setContentsMargins(24, 6, 24, 16)
        bottom_layout.addStretch(1)
        bottom_layout.addLayout(column, 100)
        bottom_layout.addStretch(1)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(top)
        layout.addWidget(self.view, 1)
        layout.addWidget(bottom)

        controller.busyChanged.connect(self._busy_changed)
        controller.historyChanged.connect(self._busy_changed)
        controller.titleChanged.connect(self.titleChanged)
        controller.settingsChanged.connect(self._settings_changed)
        controller.modelLoading.connect(self._model_loading)
        controller.budget.changed.connect(self._budget_changed)
        controller.undo_stack.indexChanged.connect(self._undo_changed)
        self._busy_changed()
        self._settings_changed(controller.settings)

    # -- actions -------------------------------------------------------------------------------

    def send(self, text: str) -> bool:
        """Send `text` as if typed (used by tests and tools): True if sent or queued."""
        self.input.setPlainText(text)
        return self._submit_from_input()

    def stop(self) -> None:
        self.controller.stop()

    def reveal(self, message_id: int) -> None:
        """Show the message `message_id` (a search hit), on its branch."""
        row = self.controller.reveal(message_id)
        if row >= 0:
            self.view.scroll_to_row(row)

    def focus_input(self) -> None:
        self.input.setFocus()

    def set_highlight_drafts(self, on: bool) -> None:
        self.view.set_highlight_drafts(on)

    def _submit(self, text: str) -> None:
        self.input.setPlainText(text)  # PromptInput cleared it; cleared again once sent
        self._submit_from_input()

    def _submit_from_input(self) -> bool:
        text = self.input.toPlainText().strip()
        if not text:
            return False
        fit = Fit.FITS if self.controller.busy else self.controller.budget.check(text)
        if fit is Fit.FITS:
            return self._send(text)
        if fit is Fit.TOO_LONG:
            self._show_overflow(text, self.controller.budget.with_draft)
            return False
        task = asyncio.ensure_future(self._send_if_it_fits(text))  # only an exact count tells
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _send_if_it_fits(self, text: str) -> None:
        try:
            tokens = await self.controller.budget.count_with(text)
        except Exception:  # noqa: BLE001 - no count: the engine itself will refuse if too long
            tokens = None
        if tokens is None or self.controller.budget.fits(tokens):
            self._send(text)
        else:
            self._show_overflow(text, tokens)

    def _send(self, text: str) -> bool:
        if not self.controller.send(text):
            return False
        if self.input.toPlainText().strip() == text:
            self.input.clear()
        self.overflow_bar.hide()
        return True

    def _show_overflow(self, text: str, tokens: int | None) -> None:
        limit = self.controller.budget.limit or 0
        needs = (
            f"it needs {tokens:,} of the model's {limit:,} tokens"
            if tokens
            else (f"the model holds {limit:,} tokens")
        )
        self._overflow_text = text
        self.overflow_bar.show_notice(
            f"Too long for this chat: with this message {needs}, and a reply needs room too.",
            "Start a new chat with it",
        )

    def _new_chat_with_overflow(self) -> None:
        text, self._overflow_text = self._overflow_text, ""
        if text:
            if self.input.toPlainText().strip() == text:
                self.input.clear()
            self.newChatRequested.emit(text)

    def _send_or_stop(self) -> None:
        if self.controller.busy and not self.input.toPlainText().strip():
            self.controller.stop()
        else:
            self.input.submit()

    # -- state ---------------------------------------------------------------------------------

    def _busy_changed(self) -> None:
        busy = self.controller.busy
        stop = busy and not self.input.toPlainText().strip()
        self.send_button.setText("Stop" if stop else ("Queue" if busy else "Send"))
        self.send_button.setObjectName("StopButton" if stop else "PrimaryButton")
        self.send_button.setToolTip(
            "Stop the reply (Esc)"
            if stop
            else ("Send when the reply ends (Enter)" if busy else "Send (Enter)")
        )
        self.send_button.style().unpolish(self.send_button)
        self.send_button.style().polish(self.send_button)
        self.input.setPlaceholderText(BUSY_PLACEHOLDER if busy else PLACEHOLDER)
        has_reply = any(m.role is Role.ASSISTANT for m in self.controller.model.sent())
        self.regenerate_button.setEnabled(not busy and has_reply)
        self.view.set_busy(busy)

    def _text_changed(self) -> None:
        self.controller.budget.set_draft(self.input.toPlainText())
        if self.controller.busy:
            self._busy_changed()  # Stop, or Queue once there is text

    def _settings_changed(self, settings: ChatSettings) -> None:
        self._loading = ""
        self._show_hint()

    def refresh_model(self) -> None:
        """The chat's model may have a new name (the default model loaded or changed)."""
        self._show_hint()

    def _model_loading(self, text: str) -> None:
        self._loading = text
        self._show_hint()

    def _show_hint(self) -> None:
        """The chat's model and speculation under the input; what its reply waits for while
        its model loads."""
        settings = self.controller.settings
        model = self.controller.model_name
        self.spec_label.setText(
            self._loading or f"{model}  ·  Speculation: {settings.describe_speculation()}"
        )
        where = settings.model or "the engine's default model"
        self.spec_label.setToolTip(f"This chat's model: {model} ({where})")

    def _budget_changed(self) -> None:
        budget = self.controller.budget
        draft = self.input.toPlainText().strip()
        tokens = budget.draft_tokens
        if draft and tokens is not None and budget.used is not None:
            if not budget.fits(budget.used + tokens):
                self._show_overflow(draft, budget.with_draft)
            elif self._overflow_text == draft:
                self.overflow_bar.hide()

    def _undo_changed(self, index: int) -> None:
        stack = self.controller.undo_stack
        if index > self._undo_index and stack.canUndo():  # a deletion just happened
            text = stack.undoText().replace("Delete", "Deleted", 1)
            self.undo_bar.show_notice(text, "Undo", timeout_ms=UNDO_NOTICE_MS)
        else:
            self.undo_bar.hide()
        self._undo_index = index

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.input and event.type() in (QEvent.Type.FocusIn, QEvent.Type.FocusOut):
            self._composer.setProperty("focused", event.type() == QEvent.Type.FocusIn)
            self._composer.style().unpolish(self._composer)
            self._composer.style().polish(self._composer)
        return super().eventFilter(watched, event)
