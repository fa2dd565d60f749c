"""A one-line notice above the composer with an action button: "Message deleted · Undo", "This
message will not fit · Start a new chat with it"."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QToolButton


class NoticeBar(QFrame):
    """Hidden until `show_notice`; its action fires `acted`, × or the timeout hide it."""

    acted = Signal()

    def __init__(self, *, kind: str = "info", parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("NoticeBar")
        self.setProperty("kind", kind)  # "info" or "warning": the style sheet colours it
        self.label = QLabel()
        self.label.setObjectName("NoticeText")
        self.label.setWordWrap(True)
        self.button = QPushButton()
        self.button.setObjectName("NoticeAction")
        self.button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.button.clicked.connect(self._act)
        close = QToolButton()
        close.setObjectName("NoticeClose")
        close.setText("×")
        close.setToolTip("Dismiss")
        close.clicked.connect(self.hide)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 6, 6, 6)
        layout.setSpacing(10)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.button)
        layout.addWidget(close)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.hide)
        self.hide()

    def show_notice(self, text: str, action: str, *, timeout_ms: int = 0) -> None:
        self.label.setText(text)
        self.button.setText(action)
        self.show()
        if timeout_ms:
            self._timer.start(timeout_ms)
        else:
            self._timer.stop()

    def _act(self) -> None:
        self.hide()
        self.acted.emit()
