"""A small two-or-more-way switch ("Last minute | Since start"): exclusive checkable buttons."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QButtonGroup, QFrame, QHBoxLayout, QToolButton


class SegmentedToggle(QFrame):
    """Exclusive choices shown side by side; `changed` carries the chosen key."""

    changed = Signal(str)

    def __init__(self, choices: dict[str, str], *, current: str, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("Segmented")
        self._group = QButtonGroup(self)
        self._group.setExclusive(True)
        self._buttons: dict[str, QToolButton] = {}
        layout = QHBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.setSpacing(2)
        for key, text in choices.items():
            button = QToolButton()
            button.setObjectName("Segment")
            button.setText(text)
            button.setCheckable(True)
            button.setChecked(key == current)
            button.toggled.connect(lambda on, k=key: self._toggled(k, on))
            self._group.addButton(button)
            self._buttons[key] = button
            layout.addWidget(button)

    @property
    def current(self) -> str:
        return next(key for key, button in self._buttons.items() if button.isChecked())

    def set_current(self, key: str) -> None:
        self._buttons[key].setChecked(True)

    def button(self, key: str) -> QToolButton:
        return self._buttons[key]

    def _toggled(self, key: str, on: bool) -> None:
        if on:
            self.changed.emit(key)
