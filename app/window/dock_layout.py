"""The main window's docks: conversations on the left, the live panel and the chat settings as
tabs on the right. A narrow window turns them all into tabs on the left so that the chat keeps
most of the width; a saved layout is restored only if it leaves the window usable."""

from __future__ import annotations

import logging

import shiboken6
from PySide6.QtCore import QByteArray, QEvent, QObject, QRect, Qt, QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QDockWidget, QMainWindow, QTabWidget, QWidget

log = logging.getLogger(__name__)

COMPACT_WIDTH = 1100  # narrower windows put every dock in one tabbed column on the left
SIDEBAR_WIDTH = 260
SIDEBAR_MIN_WIDTH = 220  # conversation titles stay readable
PANEL_WIDTH = 340
COMPACT_COLUMN_WIDTH = 290  # the tabbed column of the compact layout: its three tabs fit
COMPACT_PANEL_WIDTH = 310  # ... a little wider while the live panel or the settings show
CHAT_MIN_WIDTH = 360  # a restored layout must leave the chat at least this wide
CHAT_MIN_FRACTION = 0.4  # ... and at least this share of the window
ON_SCREEN_MIN = (160, 80)  # this much of a window (or floating dock) must be on a screen


class DockLayout(QObject):
    """Builds the docks, switches between the wide and the compact arrangement, and saves and
    restores the arrangement (falling back to the default when a restored one is unusable)."""

    def __init__(
        self, window: QMainWindow, *, sidebar: QWidget, panel: QWidget, settings: QWidget
    ) -> None:
        super().__init__(window)
        self.window = window
        window.setDockNestingEnabled(True)
        sidebar.setMinimumWidth(SIDEBAR_MIN_WIDTH)
        left, right = Qt.DockWidgetArea.LeftDockWidgetArea, Qt.DockWidgetArea.RightDockWidgetArea
        self.sidebar_dock = self._dock("Conversations", "ConversationsDock", sidebar, left)
        self.panel_dock = self._dock("Live", "LiveDock", panel, right)
        self.settings_dock = self._dock("Chat settings", "SettingsDock", settings, right)
        for dock in (self.panel_dock, self.settings_dock):
            dock.setTitleBarWidget(QWidget())  # the tabs above them name them
        self._arrange_wide()
        window.setTabPosition(Qt.DockWidgetArea.AllDockWidgetAreas, QTabWidget.TabPosition.North)
        for dock in (self.panel_dock, self.settings_dock):
            dock.visibilityChanged.connect(self._fit_column)
        self._default_state = window.saveState()
        self._wide_state: QByteArray | None = None  # while compact: the layout to go back to
        self.compact = False
        self.repairs: list[str] = []  # what restoring and validating had to fix
        self.validated = False
        window.installEventFilter(self)

    def docks(self) -> list[QDockWidget]:
        return [self.sidebar_dock, self.panel_dock, self.settings_dock]

    # -- saving and restoring ------------------------------------------------------------------

    def saved_state(self) -> str:
        """The wide arrangement (also while compact) as base64 text."""
        state = self._wide_state if self.compact else self.window.saveState()
        return state.toBase64().data().decode()

    def saved_geometry(self) -> str:
        return self.window.saveGeometry().toBase64().data().decode()

    def restore(self, geometry: str | None, state: str | None) -> None:
        """Restore a saved window; it is checked once shown (see `validate`)."""
        if geometry:
            self.window.restoreGeometry(QByteArray.fromBase64(geometry.encode()))
        if state:
            if not self.window.restoreState(QByteArray.fromBase64(state.encode())):
                self._repaired("the saved dock layout could not be read")
            floating = [dock.windowTitle() for dock in self.docks() if dock.isFloating()]
            if floating:
                # ours cannot float: without a title bar it could not be docked again
                self._repaired(f"{', '.join(floating)} floated outside the window")
                self.reset()
        self._apply_width()

    def reset(self) -> None:
        """The default arrangement, at the window's current size."""
        self.compact = False
        self.sidebar_dock.setTitleBarWidget(None)
        self._wide_state = None
        self.window.restoreState(self._default_state)
        for dock in self.docks():
            dock.setFloating(False)
            dock.show()
        self._arrange_wide()
        self._apply_width()

    def validate(self) -> None:
        """Once shown: put the window on a screen, and the default layout back if the restored
        one leaves the chat too narrow."""
        window = self.window
        if not _on_screen(window.frameGeometry()):
            self._repaired("the window was off-screen")
            _center_on_screen(window)
        chat = window.centralWidget().width()
        if chat < max(CHAT_MIN_WIDTH, CHAT_MIN_FRACTION * window.width()):
            self._repaired(f"the chat area was {chat} px wide")
            self.reset()
        self.validated = True

    def _repaired(self, what: str) -> None:
        log.warning("window layout repaired: %s", what)
        self.repairs.append(what)

    # -- compact and wide ----------------------------------------------------------------------

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.window:
            if event.type() == QEvent.Type.Resize:
                self._apply_width()
            elif event.type() == QEvent.Type.Show and not self.validated:
                QTimer.singleShot(0, self, self.validate)  # once laid out at its real size
        return super().eventFilter(watched, event)

    def _apply_width(self) -> None:
        compact = self.window.width() < COMPACT_WIDTH
        if compact and not self.compact:
            self._enter_compact()
        elif not compact and self.compact:
            self._leave_compact()

    def _enter_compact(self) -> None:
        window = self.window
        self._wide_state = window.saveState()
        self.compact = True
        left = Qt.DockWidgetArea.LeftDockWidgetArea
        for dock in (self.panel_dock, self.settings_dock):
            if dock.isFloating():
                continue
            visible = not dock.isHidden()
            window.addDockWidget(left, dock)
            window.tabifyDockWidget(self.sidebar_dock, dock)
            dock.setVisible(visible)
        self.sidebar_dock.setTitleBarWidget(QWidget())  # its tab names it
        self.sidebar_dock.raise_()
        self._resize([(self.sidebar_dock, COMPACT_COLUMN_WIDTH)])

    def _fit_column(self, shown: bool) -> None:
        """While compact, the tabbed column widens for the panel and narrows for the list."""
        dock = self.sender()
        if not shiboken6.isValid(self.window):
            return  # the window is being destroyed
        if not self.compact or not isinstance(dock, QDockWidget) or dock.isFloating():
            return
        if shown:
            self._resize([(dock, COMPACT_PANEL_WIDTH)])
        else:
            self._resize([(self.sidebar_dock, COMPACT_COLUMN_WIDTH)])

    def _leave_compact(self) -> None:
        state, self._wide_state = self._wide_state, None
        self.compact = False
        self.sidebar_dock.setTitleBarWidget(None)
        if state is None or not self.window.restoreState(state):
            self._arrange_wide()

    def _arrange_wide(self) -> None:
        window = self.window
        window.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.sidebar_dock)
        window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.panel_dock)
        window.tabifyDockWidget(self.panel_dock, self.settings_dock)
        self.panel_dock.raise_()
        self._resize([(self.sidebar_dock, SIDEBAR_WIDTH), (self.panel_dock, PANEL_WIDTH)])

    def _resize(self, widths: list[tuple[QDockWidget, int]]) -> None:
        docked = [(dock, width) for dock, width in widths if not dock.isFloating()]
        if docked:
            self.window.resizeDocks(
                [dock for dock, _w in docked], [w for _d, w in docked], Qt.Orientation.Horizontal
            )

    def _dock(self, title: str, name: str, widget: QWidget, area: Qt.DockWidgetArea) -> QDockWidget:
        dock = QDockWidget(title, self.window)
        dock.setObjectName(name)
        dock.setWidget(widget)
        dock.setFeatures(
            QDockWidget.DockWidgetFeature.DockWidgetClosable
            | QDockWidget.DockWidgetFeature.DockWidgetMovable
        )
        self.window.addDockWidget(area, dock)
        return dock


def _on_screen(rect: QRect) -> bool:
    """Whether enough of `rect` lies on some screen to grab it."""
    need_w, need_h = ON_SCREEN_MIN
    for screen in QGuiApplication.screens():
        seen = rect.intersected(screen.availableGeometry())
        if seen.width() >= min(need_w, rect.width()) and seen.height() >= min(
            need_h, rect.height()
        ):
            return True
    return False


def _center_on_screen(window: QWidget) -> None:
    area = QGuiApplication.primaryScreen().availableGeometry()
    size = window.size().boundedTo(area.size())
    window.resize(size)
    frame = window.frameGeometry()
    frame.moveCenter(area.center())
    window.move(frame.topLeft())
