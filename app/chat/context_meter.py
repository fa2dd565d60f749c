"""The chat's context use beside the composer: a thin bar (used, plus what the typed message
adds) and "1.2k / 2k", coloured as the context fills."""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QWidget

from app.chat.context_budget import ContextBudget
from app.theme import Theme, current_theme, theme_manager

BAR_WIDTH = 84
MIN_BAR_WIDTH = 36  # in a narrow window the bar gives way first
BAR_HEIGHT = 6
WARN_FRACTION = 0.8


class ContextBar(QWidget):
    """The bar: a track, the used part and, lighter, the typed message's part."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setFixedHeight(BAR_HEIGHT + 4)
        self.setMinimumWidth(MIN_BAR_WIDTH)
        self.setMaximumWidth(BAR_WIDTH)
        self._used = 0.0
        self._draft = 0.0
        self._level = "ok"
        self._theme = current_theme()
        theme_manager().changed.connect(self._theme_changed)

    def sizeHint(self) -> QSize:
        return QSize(BAR_WIDTH, BAR_HEIGHT + 4)

    def set_fractions(self, used: float, draft: float, level: str) -> None:
        self._used, self._draft, self._level = used, draft, level
        self.update()

    def _theme_changed(self, theme: Theme) -> None:
        self._theme = theme
        self.update()

    def paintEvent(self, _event) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        track = QRectF(0, 2, self.width(), BAR_HEIGHT)
        radius = BAR_HEIGHT / 2
        painter.setBrush(self._theme.color("chart_bar_bg"))
        painter.drawRoundedRect(track, radius, radius)
        color = self._theme.color(
            {"ok": "accent", "warn": "warning", "full": "danger"}[self._level]
        )
        used = min(1.0, self._used)
        draft = min(1.0 - used, self._draft)
        if draft > 0:
            soft = self._theme.color("danger" if self._level == "full" else "accent")
            soft.setAlphaF(0.35)
            painter.setBrush(soft)
            painter.drawRoundedRect(QRectF(0, 2, track.width() * (used + draft), BAR_HEIGHT),
                                    radius, radius)  # fmt: skip
        if used > 0:
            painter.setBrush(color)
            width = max(BAR_HEIGHT, track.width() * used)
            painter.drawRoundedRect(QRectF(0, 2, width, BAR_HEIGHT), radius, radius)


class ContextMeter(QWidget):
    """The bar and its numbers, following a ContextBudget."""

    def __init__(self, budget: ContextBudget, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("ContextMeter")
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.budget = budget
        self.bar = ContextBar()
        self.label = QLabel()
        self.label.setObjectName("ContextLabel")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 0, 6, 0)
        layout.setSpacing(7)
        layout.addWidget(self.bar, 0, Qt.AlignmentFlag.AlignVCenter)
        layout.addWidget(self.label)
        budget.changed.connect(self.refresh)
        self.refresh()

    @property
    def level(self) -> str:
        """ "ok", "warn" (over 80% used) or "full" (no room for a reply, or the typed message
        does not fit)."""
        budget = self.budget
        limit, used, draft = budget.limit, budget.used, budget.draft_tokens
        if not limit or used is None:
            return "ok"
        if budget.full or (draft is not None and not budget.fits(used + draft)):
            return "full"
        return "warn" if used / limit >= WARN_FRACTION else "ok"

    def text(self) -> str:
        return self.label.text()

    def refresh(self) -> None:
        budget = self.budget
        limit, used, draft = budget.limit, budget.used, budget.draft_tokens
        level = self.level
        if used is None:
            self.label.setText("– tokens")
            self.setToolTip("Context use: counted once the model is loaded")
            self.bar.set_fractions(0, 0, "ok")
            return
        # "tokens" only without a limit: the bar and the tooltip say what the numbers are
        shown = f"{_tokens(used)} / {_tokens(limit)}" if limit else f"{_tokens(used)} tokens"
        if draft:
            shown = f"+{_tokens(draft)} · " + shown
        self.label.setText(shown)
        self.label.setProperty("level", level)
        self.label.style().unpolish(self.label)
        self.label.style().polish(self.label)
        tip = f"Context: {used:,} tokens used"
        if limit:
            tip += f" of the model's {limit:,} ({100 * used / limit:.0f}%)"
        if draft:
            tip += f"\nThe message being typed adds {draft:,}"
        if level == "full":
            tip += "\nThe next message will not fit: start a new chat"
        self.setToolTip(tip)
        # without a known limit (a remote model that does not say) a bar would mean nothing
        self.bar.setVisible(bool(limit))
        if limit:
            self.bar.set_fractions(used / limit, (draft or 0) / limit, level)


def _tokens(n: int) -> str:
    """ "2,048", "32.8k": exact while short, then in thousands."""
    return f"{n:,}" if n < 10_000 else f"{n / 1000:.1f}k"
