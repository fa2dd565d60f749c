"""A message's text: Markdown in a read-only QTextBrowser that is as tall as its text, whose
code blocks carry a "Copy" link that says "Copied" for a moment once clicked."""

from __future__ import annotations

import math

from PySide6.QtCore import QSize, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QFont, QGuiApplication
from PySide6.QtWidgets import QFrame, QSizePolicy, QTextBrowser

from app.chat.markdown_render import (
    COPIED_TEXT,
    COPY_SCHEME,
    COPY_TEXT,
    RenderOptions,
    render,
    set_copy_label,
)
from app.theme import Theme

COPIED_FEEDBACK_MS = 1500


class MessageBody(QTextBrowser):
    """Rendered Markdown, sized to its text, with copyable code blocks."""

    codeCopied = Signal(int)  # the code block's index

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("MessageBody")
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextBrowserInteraction
            | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        self.viewport().setAutoFillBackground(False)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.DefaultContextMenu)
        self.anchorClicked.connect(self._anchor_clicked)
        self._code_blocks: list[str] = []
        self._text = ""
        self._options: RenderOptions | None = None
        self._pending = False
        self._width_for_height = -1

    # -- content -------------------------------------------------------------------------------

    def set_content(self, text: str, *, options: RenderOptions) -> None:
        """Show `text`. While hidden (another tab) the rendering waits until shown."""
        if text == self._text and options == self._options and not self._pending:
            return
        self._text, self._options = text, options
        if self.isVisible() or not self.window().isVisible():
            self._render()
        else:
            self._pending = True

    def text(self) -> str:
        return self._text

    def code_blocks(self) -> list[str]:
        return list(self._code_blocks)

    def copy_code(self, index: int) -> None:
        """Copy code block `index`; its link says "Copied" for a moment."""
        if 0 <= index < len(self._code_blocks):
            QGuiApplication.clipboard().setText(self._code_blocks[index])
            if set_copy_label(self.document(), index, COPIED_TEXT):
                QTimer.singleShot(COPIED_FEEDBACK_MS, self, lambda: self._copy_done(index))
            self.codeCopied.emit(index)

    def _copy_done(self, index: int) -> None:
        set_copy_label(self.document(), index, COPY_TEXT)

    def _render(self) -> None:
        self._pending = False
        if self._options is None:
            return
        result = render(self.document(), self._text, options=self._options)
        self._code_blocks = result.code_blocks
        self._width_for_height = -1
        self._fit_height()

    # -- sizing --------------------------------------------------------------------------------

    def _fit_height(self) -> None:
        width = self.viewport().width()
        if width <= 0 or width == self._width_for_height and not self._pending:
            return
        self._width_for_height = width
        doc = self.document()
        doc.setTextWidth(width)
        height = math.ceil(doc.size().height()) + 2 * self.frameWidth()
        if height != self.height():
            self.setFixedHeight(max(height, 1))

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit_height()

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self._pending:
            self._render()

    def sizeHint(self) -> QSize:
        return QSize(super().sizeHint().width(), self.height())

    def wheelEvent(self, event) -> None:
        event.ignore()  # the message list scrolls, not the message

    # -- links ---------------------------------------------------------------------------------

    def _anchor_clicked(self, url: QUrl) -> None:
        if url.scheme() == COPY_SCHEME:
            try:
                self.copy_code(int(url.path()))
            except ValueError:
                pass
        elif url.scheme() in ("http", "https", "mailto"):
            QDesktopServices.openUrl(url)


def make_options(
    theme: Theme,
    font: QFont,
    *,
    plain: bool = False,
    draft_spans: list[tuple[int, int]] | None = None,
    highlight_drafts: bool = False,
) -> RenderOptions:
    return RenderOptions(
        theme=theme,
        base_font=font,
        draft_spans=tuple(tuple(s) for s in (draft_spans or [])),
        highlight_drafts=highlight_drafts,
        plain=plain,
    )
