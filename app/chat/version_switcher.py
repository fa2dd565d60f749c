""" "‹ 2/3 ›": which version of a message is on screen, with buttons to the others."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QWidget


class VersionSwitcher(QWidget):
    """Shows "‹ n/m ›" for a message with m versions; hidden when there is only one."""

    stepRequested = Signal(int)  # -1: the previous version, +1: the next

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("VersionSwitcher")
        self.previous = self._button("‹", "Previous version", -1)
        self.next = self._button("›", "Next version", +1)
        self.label = QLabel()
        self.label.setObjectName("VersionLabel")
        self.label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.previous)
        layout.addWidget(self.label)
        layout.addWidget(self.next)
        self._index, self._count, self._enabled = 1, 1, True
        self.set_version(1, 1)

    def set_version(self, index: int, count: int, *, enabled: bool = True) -> None:
        self._index, self._count, self._enabled = index, count, enabled
        self.label.setText(f"{index}/{count}")
        self.setToolTip(f"Version {index} of {count}")
        self.previous.setEnabled(enabled and index > 1)
        self.next.setEnabled(enabled and index < count)
        self.setVisible(count > 1)

    def text(self) -> str:
        return f"‹ {self._index}/{self._count} ›"

    def _button(self, text: str, tip: str, step: int) -> QToolButton:
        button = QToolButton()
        button.setObjectName("VersionButton")
        button.setText(text)
        button.setToolTip(tip)
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.clicked.connect(lambda: self.stepRequested.emit(step))
        font = button.font()
        font.setPointSizeF(font.pointSizeF() * 1.3)
        button.setFont(font)
        return button
