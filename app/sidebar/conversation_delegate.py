"""How one saved chat is drawn in the sidebar: its title, its marks (pinned; open in a tab, a
hollow ring; writing a reply, a filled dot) and a second line (matched text with the matched
words picked out, or its size and age)."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QLineEdit, QStyle, QStyledItemDelegate, QStyleOptionViewItem, QWidget

from app.sidebar.conversation_model import ConversationRoles
from app.store.records import ConversationSummary
from app.theme import Theme, current_theme

ROW_HEIGHT = 52
MARK_SIZE = 7.0
MARK_GAP = 6.0


class ConversationDelegate(QStyledItemDelegate):
    """Two lines per chat, with marks on the right of the title."""

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex) -> QSize:
        return QSize(option.rect.width(), ROW_HEIGHT)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex) -> None:
        theme = current_theme()
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        rect = QRectF(option.rect).adjusted(6, 2, -6, -2)
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        hover = bool(option.state & QStyle.StateFlag.State_MouseOver)
        if selected or hover:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(theme.color("accent_soft" if selected else "sunken"))
            painter.drawRoundedRect(rect, 8, 8)
        summary: ConversationSummary = index.data(ConversationRoles.SUMMARY)
        generating = bool(index.data(ConversationRoles.GENERATING))
        text_rect = rect.adjusted(12, 7, -10, -7)
        marks_width = self._paint_marks(painter, theme, text_rect, summary, generating)

        title_font = QFont(option.font)
        title_font.setWeight(QFont.Weight.DemiBold)
        painter.setFont(title_font)
        painter.setPen(theme.color("text"))
        title = QFontMetrics(title_font).elidedText(
            summary.title, Qt.TextElideMode.ElideRight, int(text_rect.width() - marks_width)
        )
        painter.drawText(text_rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop, title)

        sub_font = QFont(option.font)
        sub_font.setPointSizeF(option.font.pointSizeF() * 0.9)
        subtitle = index.data(ConversationRoles.SUBTITLE) or ""
        marks = index.data(ConversationRoles.SNIPPET_MARKS) or ()
        color = theme.color("accent" if generating and not marks else "text_muted")
        _draw_runs(painter, text_rect, subtitle, marks, sub_font, color, theme.color("text"))
        painter.restore()

    def _paint_marks(
        self,
        painter: QPainter,
        theme: Theme,
        rect: QRectF,
        summary: ConversationSummary,
        generating: bool,
    ) -> float:
        """Draw the marks right of the title, right to left; return the width they take."""
        x = rect.right()
        y = rect.top() + 8
        painter.setBrush(Qt.BrushStyle.NoBrush)
        if generating:
            x -= MARK_SIZE
            halo = theme.color("accent")
            halo.setAlphaF(0.25)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(halo)
            painter.drawEllipse(QPointF(x + MARK_SIZE / 2, y), MARK_SIZE * 0.85, MARK_SIZE * 0.85)
            painter.setBrush(theme.color("accent"))
            painter.drawEllipse(QPointF(x + MARK_SIZE / 2, y), MARK_SIZE / 2, MARK_SIZE / 2)
            x -= MARK_GAP
        elif summary.is_open:
            x -= MARK_SIZE
            pen = QPen(theme.color("text_faint"))
            pen.setWidthF(1.4)
            painter.setPen(pen)
            painter.setBrush(Qt.BrushStyle.NoBrush)
            radius = MARK_SIZE / 2 - 0.7
            painter.drawEllipse(QPointF(x + MARK_SIZE / 2, y), radius, radius)
            x -= MARK_GAP
        if summary.pinned:
            x -= 11
            _draw_pin(painter, QPointF(x + 5.5, y), theme.color("text_muted"))
            x -= MARK_GAP
        return rect.right() - x

    def createEditor(self, parent: QWidget, option, index: QModelIndex) -> QWidget:
        editor = QLineEdit(parent)
        editor.setObjectName("SidebarRename")
        return editor

    def updateEditorGeometry(self, editor: QWidget, option, index: QModelIndex) -> None:
        rect = option.rect.adjusted(10, 4, -8, 0)
        rect.setHeight(editor.sizeHint().height())
        editor.setGeometry(rect)


def _draw_pin(painter: QPainter, center: QPointF, color: QColor) -> None:
    """A push pin, tilted: a round head and a needle."""
    painter.save()
    painter.translate(center)
    painter.scale(1.25, 1.25)
    painter.rotate(40)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(color)
    head = QPainterPath()
    head.addRoundedRect(QRectF(-2.6, -5.5, 5.2, 4.6), 1.6, 1.6)
    head.addRect(QRectF(-3.8, -1.4, 7.6, 1.6))
    painter.drawPath(head)
    pen = QPen(color)
    pen.setWidthF(1.2)
    pen.setCapStyle(Qt.PenCapStyle.RoundCap)
    painter.setPen(pen)
    painter.drawLine(QPointF(0, 0.2), QPointF(0, 4.8))
    painter.restore()


def _draw_runs(
    painter: QPainter,
    rect: QRectF,
    text: str,
    marks: tuple[tuple[int, int], ...],
    font: QFont,
    color: QColor,
    mark_color: QColor,
) -> None:
    """The second line, bottom-aligned in `rect`: marked words bold, elided at the right."""
    bold = QFont(font)
    bold.setWeight(QFont.Weight.Bold)
    runs: list[tuple[str, bool]] = []
    at = 0
    for start, end in sorted(marks):
        if start > at:
            runs.append((text[at:start], False))
        runs.append((text[start:end], True))
        at = end
    if at < len(text):
        runs.append((text[at:], False))
    x = rect.left()
    baseline = rect.bottom() - QFontMetrics(font).descent()
    for piece, marked in runs:
        run_font = bold if marked else font
        metrics = QFontMetrics(run_font)
        room = rect.right() - x
        width = metrics.horizontalAdvance(piece)
        if width > room:
            piece = metrics.elidedText(piece, Qt.TextElideMode.ElideRight, int(room))
            width = room
        painter.setFont(run_font)
        painter.setPen(mark_color if marked else color)
        painter.drawText(QPointF(x, baseline), piece)
        x += width
        if x >= rect.right():
            break
