"""A tab bar whose tabs can be renamed in place (double-click, or `edit_tab`) and reordered, and
the short titles that tell its tabs apart."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QLineEdit, QTabBar

TAB_TITLE_CHARS = 24
ELLIPSIS = "…"


class RenamableTabBar(QTabBar):
    """Chat tabs: movable, closable, scrolling with arrows when they overflow."""

    tabRenamed = Signal(int, str)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setMovable(True)
        self.setTabsClosable(True)
        self.setExpanding(False)
        # titles come shortened (distinct_titles); Qt's eliding would squeeze every tab to a few
        # letters before scrolling, and tabs would look alike
        self.setElideMode(Qt.TextElideMode.ElideNone)
        self.setDocumentMode(True)
        self.setUsesScrollButtons(True)
        self._editor: QLineEdit | None = None
        self._editing = -1

    def mouseDoubleClickEvent(self, event) -> None:
        index = self.tabAt(event.position().toPoint())
        if index >= 0:
            self.edit_tab(index)
        else:
            super().mouseDoubleClickEvent(event)

    def edit_tab(self, index: int) -> QLineEdit:
        """Open the in-place editor on tab `index` (Enter keeps, Esc cancels)."""
        self._close_editor(commit=False)
        editor = QLineEdit(self)
        editor.setText(self.tabToolTip(index) or self.tabText(index))
        editor.selectAll()
        editor.setGeometry(self.tabRect(index).adjusted(6, 6, -6, -3))
        editor.installEventFilter(self)
        editor.editingFinished.connect(lambda: self._close_editor(commit=True))
        editor.show()
        editor.setFocus()
        self._editor, self._editing = editor, index
        return editor

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self._editor and event.type() == QEvent.Type.KeyPress:
            if isinstance(event, QKeyEvent) and event.key() == Qt.Key.Key_Escape:
                self._close_editor(commit=False)
                return True
        return super().eventFilter(watched, event)

    def _close_editor(self, *, commit: bool) -> None:
        editor, index = self._editor, self._editing
        if editor is None:
            return
        self._editor, self._editing = None, -1
        text = editor.text().strip()
        editor.deleteLater()
        if commit and text and 0 <= index < self.count():
            self.tabRenamed.emit(index, text)


def tab_title(title: str, *, limit: int = TAB_TITLE_CHARS) -> str:
    """`title` cut to `limit` characters at the end."""
    return title if len(title) <= limit else title[: limit - 1].rstrip() + ELLIPSIS


def _middle_title(title: str, limit: int) -> str:
    """`title` cut to `limit` characters in the middle, so that its ending shows."""
    if len(title) <= limit:
        return title
    head = (limit - 1) // 2
    tail = limit - 1 - head
    return title[:head].rstrip() + ELLIPSIS + title[-tail:].lstrip()


def distinct_titles(titles: list[str], *, limit: int = TAB_TITLE_CHARS) -> list[str]:
    """Short titles that differ wherever the full titles do: cut at the end, or in the middle
    where that made two alike; equal full titles are numbered ("Notes", "Notes (2)")."""
    ends = [tab_title(t, limit=limit) for t in titles]
    short = [
        _middle_title(title, limit)
        if any(ends[j] == ends[i] and titles[j] != title for j in range(len(titles)))
        else ends[i]
        for i, title in enumerate(titles)
    ]
    seen: dict[str, int] = {}
    for i, text in enumerate(short):
        seen[text] = seen.get(text, 0) + 1
        if seen[text] > 1:
            short[i] = f"{text} ({seen[text]})"
    return short
