"""Editing a sent message in place: Ctrl+Enter saves (and sends it as a new version), Esc
cancels."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

EDITOR_MIN_HEIGHT = 72
EDITOR_MAX_HEIGHT = 320
SAVE_KEYS = (Qt.Key.Key_Return, Qt.Key.Key_Enter)


class MessageEditor(QWidget):
    """A text box with Cancel and Save & send; the keys work even where Esc stops a reply."""

    saved = Signal(str)
    cancelled = Signal()

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.text_box = QPlainTextEdit()
        self.text_box.setObjectName("MessageEditor")
        self.text_box.installEventFilter(self)
        self.text_box.document().documentLayout().documentSizeChanged.connect(self._fit)
        hint = QLabel("Ctrl+Enter to send · Esc to cancel")
        hint.setObjectName("Hint")
        cancel = QPushButton("Cancel")
        cancel.clicked.connect(self.cancel)
        self.save_button = QPushButton("Save && send")
        self.save_button.setObjectName("PrimaryButton")
        self.save_button.clicked.connect(self.save)
        bar = QHBoxLayout()
        bar.setContentsMargins(0, 0, 0, 0)
        bar.addWidget(hint)
        bar.addStretch(1)
        bar.addWidget(cancel)
        bar.addWidget(self.save_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addWidget(self.text_box)
        layout.addLayout(bar)

    def start(self, text: str) -> None:
        self.text_box.setPlainText(text)
        self.show()
        self.text_box.setFocus()
        self.text_box.moveCursor(self.text_box.textCursor().MoveOperation.End)

    def _fit(self, *_args) -> None:
        """As tall as the text, between EDITOR_MIN_HEIGHT and EDITOR_MAX_HEIGHT."""
        lines = self.text_box.document().size().height()  # in lines for QPlainTextEdit
        margins = self.text_box.contentsMargins()
        height = lines * self.text_box.fontMetrics().lineSpacing() + margins.top()
        height += margins.bottom() + 2 * self.text_box.document().documentMargin() + 8
        self.text_box.setFixedHeight(int(min(EDITOR_MAX_HEIGHT, max(EDITOR_MIN_HEIGHT, height))))

    def save(self) -> None:
        text = self.text_box.toPlainText().strip()
        if text:
            self.hide()
            self.saved.emit(text)

    def cancel(self) -> None:
        self.hide()
        self.cancelled.emit()

    def eventFilter(self, watched, event: QEvent) -> bool:
        if watched is self.text_box and event.type() in (
            QEvent.Type.ShortcutOverride,
            QEvent.Type.KeyPress,
        ):
            key = event.key() if isinstance(event, QKeyEvent) else None
            ctrl = bool(event.modifiers() & Qt.KeyboardModifier.ControlModifier)
            if key == Qt.Key.Key_Escape or (key in SAVE_KEYS and ctrl):
                if event.type() == QEvent.Type.ShortcutOverride:
                    event.accept()  # ours, not the window's Esc (stop) shortcut
                elif key == Qt.Key.Key_Escape:
                    self.cancel()
                else:
                    self.save()
                return True
        return super().eventFilter(watched, event)
