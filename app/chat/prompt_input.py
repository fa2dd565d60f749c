"""The input box: Enter sends, Shift+Enter starts a new line; it grows with its text."""

from __future__ import annotations

import math

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QFrame, QPlainTextEdit, QSizePolicy

DEFAULT_MIN_LINES = 1
DEFAULT_MAX_LINES = 8
PLACEHOLDER = "Message Tandem…   (Enter to send, Shift+Enter for a new line)"


class PromptInput(QPlainTextEdit):
    submitted = Signal(str)

    def __init__(self, parent=None, *, max_lines: int = DEFAULT_MAX_LINES) -> None:
        super().__init__(parent)
        self.setObjectName("PromptInput")
        self.setPlaceholderText(PLACEHOLDER)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setTabChangesFocus(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._max_lines = max_lines
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self._fit()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            modifiers = event.modifiers()
            if modifiers & (Qt.KeyboardModifier.ShiftModifier | Qt.KeyboardModifier.AltModifier):
                self.insertPlainText("\n")
                return
            self.submit()
            return
        super().keyPressEvent(event)

    def submit(self) -> None:
        """Emit the text (if any) and clear the box."""
        text = self.toPlainText().strip()
        if not text:
            return
        self.clear()
        self.submitted.emit(text)

    def _fit(self, *_args) -> None:
        lines = max(DEFAULT_MIN_LINES, min(self.document().lineCount(), self._max_lines))
        wrapped = self.document().size().height()  # in lines for QPlainTextEdit's layout
        lines = max(lines, min(math.ceil(wrapped), self._max_lines))
        height = self.fontMetrics().lineSpacing() * lines
        margins = self.contentsMargins()
        doc_margin = 2 * self.document().documentMargin()
        self.setFixedHeight(int(height + doc_margin + margins.top() + margins.bottom()) + 4)
        full = wrapped > self._max_lines or self.document().lineCount() > self._max_lines
        policy = (
            Qt.ScrollBarPolicy.ScrollBarAsNeeded if full else Qt.ScrollBarPolicy.ScrollBarAlwaysOff
        )
        if self.verticalScrollBarPolicy() != policy:
            self.setVerticalScrollBarPolicy(policy)
