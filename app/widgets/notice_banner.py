"""A tinted notice with a message and buttons (a speculation that loses, an engine that died)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

NOTICE_KINDS = ("info", "warning", "danger")


class NoticeBanner(QFrame):
    """A message in the colours of its kind, with action buttons under (or beside) it."""

    def __init__(self, kind: str = "warning", *, inline_buttons: bool = False, parent=None):
        super().__init__(parent)
        self.setObjectName("Notice")
        self.title = QLabel()
        self.title.setObjectName("NoticeTitle")
        self.title.setVisible(False)
        self.text = QLabel()
        self.text.setObjectName("NoticeText")
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._buttons = QHBoxLayout()
        self._buttons.setContentsMargins(0, 0, 0, 0)
        self._buttons.setSpacing(6)
        words = QVBoxLayout()
        words.setContentsMargins(0, 0, 0, 0)
        words.setSpacing(2)
        words.addWidget(self.title)
        words.addWidget(self.text)
        if inline_buttons:
            layout = QHBoxLayout(self)
            layout.setContentsMargins(14, 8, 10, 8)
            layout.setSpacing(12)
            layout.addLayout(words, 1)
            layout.addLayout(self._buttons)
        else:
            layout = QVBoxLayout(self)
            layout.setContentsMargins(10, 8, 10, 10)
            layout.setSpacing(8)
            layout.addLayout(words)
            row = QWidget()
            row.setLayout(self._buttons)
            self._buttons.addStretch(1)  # buttons sit on the right
            layout.addWidget(row)
        self.set_kind(kind)

    def set_kind(self, kind: str) -> None:
        self.setProperty("kind", kind if kind in NOTICE_KINDS else "info")
        for widget in (self, self.title, self.text):
            widget.style().unpolish(widget)
            widget.style().polish(widget)

    def set_message(self, text: str, *, title: str = "") -> None:
        self.text.setText(text)
        self.title.setText(title)
        self.title.setVisible(bool(title))

    def add_button(self, text: str, slot: Callable[[], None], *, tip: str = "") -> QPushButton:
        button = QPushButton(text)
        button.setObjectName("NoticeButton")
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        if tip:
            button.setToolTip(tip)
        button.clicked.connect(lambda _checked=False: slot())
        self._buttons.addWidget(button)
        return button

    def buttons(self) -> list[QPushButton]:
        return [
            self._buttons.itemAt(i).widget()
            for i in range(self._buttons.count())
            if isinstance(self._buttons.itemAt(i).widget(), QPushButton)
        ]
