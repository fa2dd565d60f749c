"""Help → Keyboard shortcuts: every menu action that has a shortcut, read from the menus
themselves so that the list can never go stale."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QMenu,
    QMenuBar,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

TYPING_HINT = "In the message box: Enter sends, Shift+Enter starts a new line."


@dataclass(frozen=True)
class Shortcut:
    """One row of the list."""

    menu: str
    action: str
    keys: str  # e.g. "Ctrl+T, Ctrl+N", as the platform writes them


def shortcuts_of(menu_bar: QMenuBar) -> list[Shortcut]:
    """(menu, action, keys) for every action with a shortcut, in menu order."""
    found: list[Shortcut] = []

    def walk(menu: QMenu, title: str) -> None:
        for act in menu.actions():
            if act.menu() is not None:
                walk(act.menu(), f"{title} › {_plain(act.text())}")
            elif _keys(act) and not act.isSeparator():
                found.append(Shortcut(title, _plain(act.text()), _keys(act)))

    for top in menu_bar.actions():
        if top.menu() is not None:
            walk(top.menu(), _plain(top.text()))
    return found


class ShortcutsDialog(QDialog):
    """The keyboard shortcuts, grouped by menu."""

    def __init__(self, menu_bar: QMenuBar, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        self.resize(460, 560)
        self.tree = QTreeWidget()
        self.tree.setObjectName("ShortcutList")
        self.tree.setColumnCount(2)
        self.tree.setHeaderLabels(["Action", "Keys"])
        self.tree.setRootIsDecorated(False)
        self.tree.setSelectionMode(QTreeWidget.SelectionMode.NoSelection)
        self.tree.header().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.tree.header().setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        self.shortcuts = shortcuts_of(menu_bar)
        groups: dict[str, QTreeWidgetItem] = {}
        for shortcut in self.shortcuts:
            group = groups.get(shortcut.menu)
            if group is None:
                group = groups[shortcut.menu] = QTreeWidgetItem(self.tree, [shortcut.menu])
                font = group.font(0)
                font.setBold(True)
                group.setFont(0, font)
                group.setFirstColumnSpanned(True)
                group.setExpanded(True)
            QTreeWidgetItem(group, [shortcut.action, shortcut.keys])
        hint = QLabel(TYPING_HINT)
        hint.setObjectName("Hint")
        hint.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 16, 16, 16)
        layout.addWidget(self.tree, 1)
        layout.addWidget(hint)
        layout.addWidget(buttons)

    def rows(self) -> list[tuple[str, str]]:
        """(action, keys) as shown."""
        return [(s.action, s.keys) for s in self.shortcuts]


def _plain(text: str) -> str:
    return text.replace("&&", "\0").replace("&", "").replace("\0", "&")


def _keys(act: QAction) -> str:
    native = QKeySequence.SequenceFormat.NativeText
    return ", ".join(s.toString(native) for s in act.shortcuts() if not s.isEmpty())
