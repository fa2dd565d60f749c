"""A bar chart of draft acceptance by position: for each draft position, the share of drafts that
reached it whose token there was kept (SpecStats.acceptance_by_position, as the engine says)."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QFont, QPainter
from PySide6.QtWidgets import QSizePolicy, QWidget

from app.theme import Theme, current_theme, theme_manager

DEFAULT_HEIGHT = 84
MAX_BAR_WIDTH = 28
LABEL_HEIGHT = 14


class PositionChart(QWidget):
    """Bars of acceptance, one per draft position; "No drafts yet" when there are none."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("PositionChart")
        self.setMinimumHeight(DEFAULT_HEIGHT)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self._rates: list[float] = []
        self._theme = current_theme()
        self.empty_text = "No drafts yet"
        theme_manager().changed.connect(self._theme_changed)

    def sizeHint(self) -> QSize:
        return QSize(160, DEFAULT_HEIGHT)

    def set_rates(self, rates: Sequence[float]) -> None:
        rates = list(rates)
        if rates != self._rates:
            self._rates = rates
            self.update()

    def rates(self) -> list[float]:
        return list(self._rates)

    def _theme_changed(self, theme: Theme) -> None:
        self._theme = theme
        self.update()

    def paintEvent(self, _event) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        theme = self._theme
        small = QFont(self.font())
        small.setPointSizeF(max(7.0, self.font().pointSizeF() * 0.82))
        painter.setFont(small)
        rect = QRectF(self.rect()).adjusted(2, 2, -2, -2)
        if not self._rates:
            painter.setPen(theme.color("text_faint"))
            painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, self.empty_text)
            return
        n = len(self._rates)
        chart = rect.adjusted(0, LABEL_HEIGHT, 0, -LABEL_HEIGHT)
        slot = chart.width() / n
        bar_width = min(MAX_BAR_WIDTH, slot * 0.62)
        for i, rate in enumerate(self._rates):
            x = chart.left() + i * slot + (slot - bar_width) / 2
            track = QRectF(x, chart.top(), bar_width, chart.height())
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(theme.color("chart_bar_bg"))
            painter.drawRoundedRect(track, 3, 3)
            height = chart.height() * max(0.0, min(rate, 1.0))
            if height > 0:
                painter.setBrush(theme.color("chart_bar"))
                painter.drawRoundedRect(QRectF(x, chart.bottom() - height, bar_width, height), 3, 3)
            painter.setPen(theme.color("text_muted"))
            label = QRectF(chart.left() + i * slot, chart.bottom() + 1, slot, LABEL_HEIGHT)
            painter.drawText(label, Qt.AlignmentFlag.AlignCenter, str(i + 1))
            value = QRectF(chart.left() + i * slot, rect.top(), slot, LABEL_HEIGHT)
            painter.setPen(theme.color("text"))
            painter.drawText(value, Qt.AlignmentFlag.AlignCenter, f"{100 * rate:.0f}%")
