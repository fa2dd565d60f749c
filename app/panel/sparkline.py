"""A small line chart of recent values (tokens/s over time)."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QPointF, QSize, Qt
from PySide6.QtGui import QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from app.theme import Theme, current_theme, theme_manager

DEFAULT_HEIGHT = 40
DEFAULT_CAPACITY = 120


class Sparkline(QWidget):
    def __init__(self, parent=None, *, capacity: int = DEFAULT_CAPACITY) -> None:
        super().__init__(parent)
        self.setObjectName("Sparkline")
        self.setMinimumHeight(DEFAULT_HEIGHT)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self._values: list[float] = []
        self._capacity = capacity
        self._theme = current_theme()
        theme_manager().changed.connect(self._theme_changed)

    def sizeHint(self) -> QSize:
        return QSize(160, DEFAULT_HEIGHT)

    def set_values(self, values: Sequence[float]) -> None:
        values = list(values)[-self._capacity :]
        if values != self._values:
            self._values = values
            self.update()

    def values(self) -> list[float]:
        return list(self._values)

    def _theme_changed(self, theme: Theme) -> None:
        self._theme = theme
        self.update()

    def paintEvent(self, _event) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        rect = self.rect().adjusted(1, 3, -1, -2)
        base = QPen(self._theme.color("border"))
        base.setWidthF(1.0)
        painter.setPen(base)
        painter.drawLine(rect.bottomLeft(), rect.bottomRight())
        values = self._values
        if len(values) < 2:
            return
        top = max(max(values), 1e-6) * 1.15
        step = rect.width() / (self._capacity - 1)
        x0 = rect.right() - step * (len(values) - 1)
        points = [
            QPointF(x0 + i * step, rect.bottom() - (v / top) * rect.height())
            for i, v in enumerate(values)
        ]
        line = QPainterPath(points[0])
        for p in points[1:]:
            line.lineTo(p)
        fill = QPainterPath(line)
        fill.lineTo(points[-1].x(), rect.bottom())
        fill.lineTo(points[0].x(), rect.bottom())
        fill.closeSubpath()
        painter.fillPath(fill, self._theme.color("chart_fill"))
        pen = QPen(self._theme.color("chart_line"))
        pen.setWidthF(1.6)
        pen.setJoinStyle(Qt.PenJoinStyle.RoundJoin)
        painter.setPen(pen)
        painter.drawPath(line)
        painter.setBrush(self._theme.color("chart_line"))
        painter.setPen(Qt.PenStyle.NoPen)
        painter.drawEllipse(points[-1], 2.5, 2.5)
