"""The Help menu: the keyboard shortcuts list made from the real actions, and About with the
app's, MLX's, mlx-lm's and Qt's versions and the device."""

from __future__ import annotations

from importlib import metadata

from apphelpers import ARTIFACTS
from PySide6.QtCore import qVersion
from PySide6.QtGui import QAction, QKeySequence

from app.window.shortcuts_dialog import ShortcutsDialog

SHOTS = ARTIFACTS / "screenshots"


def _keys(text: str) -> str:
    return QKeySequence(text).toString(QKeySequence.SequenceFormat.NativeText)


def test_shortcuts_dialog_lists_the_real_shortcuts(qtbot, window):
    dialog = window.show_shortcuts()
    assert dialog.isVisible()
    rows = dict(dialog.rows())
    assert rows["New chat"] == f"{_keys('Ctrl+T')}, {_keys('Ctrl+N')}"
    assert rows["Next chat"] == _keys("Ctrl+PgDown")
    assert rows["Previous chat"] == _keys("Ctrl+PgUp")
    assert rows["Last chat"] == _keys("Alt+9") and rows["Chat 1"] == _keys("Alt+1")
    assert rows["Keyboard shortcuts"].startswith(_keys("F1"))
    assert rows["Stop reply"] == _keys("Esc") and rows["Quit"] == _keys("Ctrl+Q")
    menus = {s.menu for s in dialog.shortcuts}
    assert {"File", "Chat", "View", "Tabs", "Models", "Help"} <= menus
    assert dialog.tree.topLevelItemCount() == len(menus)
    # built from the actions each time: a changed shortcut shows at once
    window.menu_actions.regenerate.setShortcut(QKeySequence("Ctrl+Shift+R"))
    extra = QAction("Do something new", window)
    extra.setShortcut(QKeySequence("Ctrl+Alt+N"))
    window.menuBar().actions()[1].menu().addAction(extra)
    rows = dict(ShortcutsDialog(window.menuBar()).rows())
    assert rows["Regenerate reply"] == _keys("Ctrl+Shift+R")
    assert rows["Do something new"] == _keys("Ctrl+Alt+N")
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert dialog.grab().save(str(SHOTS / "shortcuts-light.png"))
    dialog.close()


def test_about_shows_versions_and_device(qtbot, window):
    window.bridge.engine._stats.device = "cpu (fake)"
    window.bridge.poll_stats()
    dialog = window.show_about()
    info = dialog.info
    assert info.version == metadata.version("tandem")
    assert info.mlx == metadata.version("mlx") and info.mlx_lm == metadata.version("mlx-lm")
    assert info.qt.startswith(qVersion())
    assert info.device == "cpu (fake)"
    assert dialog.values["mlx_lm"].text() == info.mlx_lm
    assert window.menu_actions.about.text() == "About Tandem"
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert dialog.grab().save(str(SHOTS / "about-light.png"))
    dialog.close()
