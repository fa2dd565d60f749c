"""The window at 800×600 and a saved layout that would break it: the docks fold into tabs beside
the conversations, the chat keeps most of the width, and a bad saved state falls back to the
default. Saves screenshots of the small window."""

from __future__ import annotations

from apphelpers import ARTIFACTS, close_window, make_window, spin
from PySide6.QtCore import QByteArray, QPoint, Qt

from app.theme import theme_manager
from app.window.dock_layout import COMPACT_WIDTH, SIDEBAR_MIN_WIDTH

SHOTS = ARTIFACTS / "screenshots"
SMALL = (800, 600)


def _settle(window) -> None:
    spin(lambda: window.docks.validated, 2)
    spin(lambda: False, 0.1)


def _forget_geometry(store) -> None:
    """Keep the saved dock state only: the offscreen screen (800×600) would shrink a restored
    1360 px window into the compact layout, where docks cannot squeeze the chat."""
    store.set_setting("window_geometry", None)


def _shown(dock) -> bool:
    """On screen: a tabified dock whose tab is not selected is not."""
    return dock.isVisible() and not dock.visibleRegion().isEmpty()


def _chat_width(window) -> int:
    return window.centralWidget().width()


def test_small_window_folds_the_docks_and_keeps_the_chat_wide(qtbot, window, fake_engine):
    fake_engine.reply = "A short answer with `code` in it, then **bold** text. " * 6
    tab = window.current_tab()
    assert tab.send("How small can this window get?")
    assert spin(lambda: not tab.controller.busy, 10)
    window.resize(*SMALL)
    _settle(window)
    assert window.docks.compact
    docks = window.docks
    assert set(window.tabifiedDockWidgets(docks.sidebar_dock)) == {
        docks.panel_dock,
        docks.settings_dock,
    }
    assert window.size().toTuple() == SMALL
    assert _shown(docks.sidebar_dock) and not _shown(docks.panel_dock)
    assert _chat_width(window) >= 0.6 * SMALL[0]
    assert docks.sidebar_dock.width() >= SIDEBAR_MIN_WIDTH
    for theme in ("light", "dark"):
        theme_manager().apply(theme)
        spin(lambda: False, 0.15)
        SHOTS.mkdir(parents=True, exist_ok=True)
        assert window.grab().save(str(SHOTS / f"window-800x600-{theme}.png"))
    theme_manager().apply("light")
    # the panel is one click away, and the chat keeps its width meanwhile
    docks.panel_dock.raise_()
    assert spin(lambda: _shown(docks.panel_dock) and docks.panel_dock.width() >= 280, 1)
    assert _chat_width(window) >= 0.55 * SMALL[0]
    window.grab().save(str(SHOTS / "window-800x600-panel-light.png"))
    # wide again: the panel goes back to the right
    window.resize(COMPACT_WIDTH + 260, 860)
    _settle(window)
    assert not window.docks.compact
    assert window.dockWidgetArea(docks.panel_dock) == Qt.DockWidgetArea.RightDockWidgetArea
    assert window.dockWidgetArea(docks.sidebar_dock) == Qt.DockWidgetArea.LeftDockWidgetArea


def test_small_window_reopens_small_and_wide_layout_is_what_is_saved(qtbot, store, fake_bridge):
    window = make_window(store, fake_bridge)
    window.resize(*SMALL)
    _settle(window)
    assert window.docks.compact
    close_window(window)
    again = make_window(store, fake_bridge)
    _settle(again)
    assert abs(again.width() - SMALL[0]) <= 4 and again.docks.compact
    assert _chat_width(again) >= 0.6 * SMALL[0]
    again.resize(1400, 860)
    _settle(again)
    assert again.dockWidgetArea(again.panel_dock) == Qt.DockWidgetArea.RightDockWidgetArea
    close_window(again)


def test_floating_docks_in_saved_state_fall_back_to_default(qtbot, store, fake_bridge):
    window = make_window(store, fake_bridge)
    window.resize(1360, 860)
    _settle(window)
    window.panel_dock.setFloating(True)
    window.panel_dock.move(QPoint(-9000, -9000))
    window.sidebar_dock.setFloating(True)
    window.sidebar_dock.move(QPoint(30000, 200))
    close_window(window)
    _forget_geometry(store)
    again = make_window(store, fake_bridge)
    _settle(again)
    assert any("floated outside the window" in r for r in again.docks.repairs)
    assert not again.panel_dock.isFloating() and not again.sidebar_dock.isFloating()
    assert again.dockWidgetArea(again.panel_dock) == Qt.DockWidgetArea.RightDockWidgetArea
    close_window(again)


def test_chat_squeezed_or_window_lost_in_saved_state_falls_back(qtbot, store, fake_bridge):
    window = make_window(store, fake_bridge)
    window.resize(1360, 860)
    _settle(window)
    # a splitter dragged until the docks take nearly everything
    window.resizeDocks([window.sidebar_dock], [900], Qt.Orientation.Horizontal)
    window.resizeDocks([window.panel_dock], [900], Qt.Orientation.Horizontal)
    spin(lambda: False, 0.05)
    squeezed = _chat_width(window)
    close_window(window)
    assert squeezed < 0.4 * 1360, f"the test did not squeeze the chat ({squeezed} px)"
    _forget_geometry(store)
    again = make_window(store, fake_bridge)
    _settle(again)
    assert any("chat area" in r for r in again.docks.repairs)
    assert _chat_width(again) >= 0.4 * again.width()
    close_window(again)
    # a window saved on a screen that is gone, and state bytes that are not a state at all
    store.set_setting("window_state", QByteArray(b"not a saved state").toBase64().data().decode())
    lost = make_window(store, fake_bridge)
    lost.move(25000, 25000)
    lost.docks.validated = False
    lost.docks.validate()
    assert any("off-screen" in r for r in lost.docks.repairs)
    assert any("could not be read" in r for r in lost.docks.repairs)
    assert lost.screen().availableGeometry().intersects(lost.frameGeometry())
    close_window(lost)
