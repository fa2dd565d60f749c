"""A titled card of labelled values (the live panel is made of these)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QFrame, QGridLayout, QLabel, QVBoxLayout, QWidget

METRIC_COLUMNS = 2


class MetricCard(QFrame):
    """A card with a small-caps title, free widgets and a grid of named values."""

    def __init__(self, title: str, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("Card")
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(12, 10, 12, 12)
        self._layout.setSpacing(6)
        self.title = QLabel(title.upper())
        self.title.setObjectName("CardTitle")
        font = QFont(self.title.font())
        font.setPointSizeF(font.pointSizeF() * 0.85)
        font.setLetterSpacing(QFont.SpacingType.PercentageSpacing, 106)
        self.title.setFont(font)
        self._layout.addWidget(self.title)
        self._grid: QGridLayout | None = None
        self._values: dict[str, QLabel] = {}
        self._names: dict[str, QLabel] = {}  # each figure's label
        self._count = 0

    def add_widget(self, widget: QWidget) -> None:
        self._grid = None  # metrics added after this start a new grid
        self._layout.addWidget(widget)

    def add_caption(self, text: str) -> QLabel:
        label = QLabel(text)
        label.setObjectName("MetricLabel")
        self.add_widget(label)
        return label

    def add_metric(
        self, key: str, label: str, *, tip: str = "", big: bool = False, wide: bool = False
    ) -> QLabel:
        """A named value in the grid: two to a row, or a row of its own (`big`: in a larger
        font; `wide`: a long value, wrapped rather than widening the card)."""
        if self._grid is None:
            holder = QWidget()
            self._grid = QGridLayout(holder)
            self._grid.setContentsMargins(0, 2, 0, 2)
            self._grid.setHorizontalSpacing(12)
            self._grid.setVerticalSpacing(6)
            self._layout.addWidget(holder)
            self._count = 0
        name = QLabel(label)
        name.setObjectName("MetricLabel")
        name.setWordWrap(True)  # a narrow panel wraps its labels rather than clipping the card
        value = QLabel("–")
        value.setObjectName("MetricValue")
        value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        value.setWordWrap(wide)
        if big:
            font = QFont(value.font())
            font.setPointSizeF(font.pointSizeF() * 1.5)
            value.setFont(font)
        if tip:
            name.setToolTip(tip)
            value.setToolTip(tip)
        cell = QWidget()
        box = QVBoxLayout(cell)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(0)
        box.addWidget(name)
        box.addWidget(value)
        if (big or wide) and self._count % METRIC_COLUMNS:
            self._count += METRIC_COLUMNS - self._count % METRIC_COLUMNS  # a row of its own
        row, column = divmod(self._count, METRIC_COLUMNS)
        if big or wide:
            self._grid.addWidget(cell, row, 0, 1, METRIC_COLUMNS, Qt.AlignmentFlag.AlignTop)
            self._count += METRIC_COLUMNS
        else:
            self._grid.addWidget(cell, row, column, Qt.AlignmentFlag.AlignTop)
            self._count += 1
        self._values[key] = value
        self._names[key] = name
        return value

    def set_value(self, key: str, text: str) -> None:
        label = self._values[key]
        if label.text() != text:
            label.setText(text)

    def set_tip(self, key: str, tip: str) -> None:
        """The tooltip of one figure (and of its label)."""
        label = self._values[key]
        if label.toolTip() != tip:
            label.setToolTip(tip)
            self._names[key].setToolTip(tip)

    def value(self, key: str) -> str:
        return self._values[key].text()

    def tip(self, key: str) -> str:
        return self._values[key].toolTip()
