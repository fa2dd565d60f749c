"""A message's action buttons and what to do when they have too little room: the buttons that
do not fit move, in a fixed order, into the "⋯" menu beside them. A button is never squeezed
below its size hint (a clipped "Contin"), and no action is ever out of reach."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QSize
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QHBoxLayout, QToolButton, QWidget

DEFAULT_SPACING = 6


class MessageActions(QWidget):
    """A row of action buttons ending in a "⋯" menu; it asks for no width of its own, so it
    never widens the chat column (the message gives it a line of its own when squeezed)."""

    def __init__(
        self,
        buttons: list[QToolButton],
        more: QToolButton,
        *,
        overflow_order: list[QToolButton],
        on_hint_change: Callable[[], None],
    ) -> None:
        super().__init__()
        self._buttons = [*buttons, more]
        self._more = more
        self._order = overflow_order  # the first of these goes into the menu first
        self._on_hint_change = on_hint_change
        self._wanted: dict[QToolButton, bool] = {button: False for button in self._buttons}
        self._folded: set[QToolButton] = set()
        self._entries: dict[QToolButton, QAction] = {}
        menu = more.menu()
        self._own = menu.actions()  # the menu's own entries, offered with the menu button
        first = self._own[0] if self._own else None
        for button in overflow_order:  # an entry per button, shown while the button is folded
            entry = QAction(button.text(), menu)
            entry.setToolTip(button.toolTip())
            entry.triggered.connect(button.click)
            entry.setVisible(False)
            menu.insertAction(first, entry)
            self._entries[button] = entry
        self._separator = menu.insertSeparator(first) if first else None
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(DEFAULT_SPACING)
        layout.addStretch(1)
        for button in self._buttons:
            layout.addWidget(button)
        self._show()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        return QSize(0, super().minimumSizeHint().height())

    def event(self, event) -> bool:
        if event.type() == QEvent.Type.LayoutRequest:  # a button's text or visibility changed
            self._on_hint_change()
        return super().event(event)

    def set_wanted(self, wanted: dict[QToolButton, bool]) -> None:
        """Which actions the message offers now; `fit` then decides which show as buttons."""
        self._wanted.update(wanted)
        self._show()

    def offers(self, button: QToolButton) -> bool:
        """Whether the message offers this action, as a button or as a menu entry."""
        return self._wanted[button]

    def folded(self) -> list[QToolButton]:
        """The offered actions that live in the "⋯" menu for want of room."""
        return [button for button in self._order if button in self._folded]

    def full_width(self) -> int:
        """The width every offered action needs as a button."""
        return self._width(set())

    def fit(self, room: int) -> None:
        """Folds buttons into the menu, in order, until the row fits `room` pixels (the menu
        button shows for them even where the message offers no menu of its own)."""
        folded: set[QToolButton] = set()
        for button in self._order:
            if self._width(folded) <= room:
                break
            if self._wanted[button]:
                folded.add(button)
        if folded != self._folded:
            self._folded = folded
            self._show()

    def _width(self, folded: set[QToolButton]) -> int:
        shown = [b for b in self._buttons if self._shows(b, folded)]
        if not shown:
            return 0
        return sum(b.sizeHint().width() for b in shown) + DEFAULT_SPACING * (len(shown) - 1)

    def _shows(self, button: QToolButton, folded: set[QToolButton]) -> bool:
        if button is self._more:
            return self._wanted[button] or bool(folded)
        return self._wanted[button] and button not in folded

    def _show(self) -> None:
        for button in self._buttons:
            button.setVisible(self._shows(button, self._folded))
        for entry in self._own:
            entry.setVisible(self._wanted[self._more])
        for button, entry in self._entries.items():
            entry.setVisible(self._wanted[button] and button in self._folded)
            entry.setEnabled(button.isEnabled())
        if self._separator is not None:
            self._separator.setVisible(bool(self._folded) and self._wanted[self._more])
