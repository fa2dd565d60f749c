"""The main window's menus, actions and keyboard shortcuts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QApplication

from app.theme import THEME_MODES, theme_manager

if TYPE_CHECKING:
    from app.window.main_window import MainWindow


@dataclass
class Actions:
    new_chat: QAction
    close_chat: QAction
    stop: QAction
    regenerate: QAction
    rename: QAction
    export: QAction
    delete: QAction
    settings: QAction
    models: QAction
    highlight: QAction
    quit: QAction


def build_menus(window: MainWindow) -> Actions:
    bar = window.menuBar()

    def action(text: str, slot, shortcut=None, *, tip: str = "") -> QAction:
        act = QAction(text, window)
        if shortcut is not None:
            act.setShortcut(QKeySequence(shortcut))
        if tip:
            act.setStatusTip(tip)
        act.triggered.connect(lambda _checked=False: slot())
        window.addAction(act)  # shortcuts work with the menu bar hidden too
        return act

    file_menu = bar.addMenu("&File")
    new_chat = action("New chat", window.new_chat, QKeySequence.StandardKey.AddTab)
    new_chat.setShortcuts([QKeySequence("Ctrl+T"), QKeySequence("Ctrl+N")])
    close_chat = action("Close chat", window.close_current_tab, QKeySequence("Ctrl+W"))
    export = action("Export chat to Markdown…", window.export_dialog, QKeySequence("Ctrl+E"))
    export_all = action("Export all chats to Markdown…", window.history.export_all)
    delete = action("Delete chat…", window.delete_current)
    quit_action = action("Quit", QApplication.closeAllWindows, QKeySequence.StandardKey.Quit)
    for act in (new_chat, close_chat, None, export, export_all, delete, None, quit_action):
        file_menu.addSeparator() if act is None else file_menu.addAction(act)

    chat_menu = bar.addMenu("&Chat")
    stop = action("Stop reply", window.stop_current, QKeySequence(QKeySequence.StandardKey.Cancel))
    stop.setEnabled(False)
    regenerate = action("Regenerate reply", window.regenerate_current, QKeySequence("Ctrl+R"))
    rename = action("Rename chat", window.rename_current_tab, QKeySequence("F2"))
    settings = action("Chat settings", window.show_settings, QKeySequence("Ctrl+,"))
    for act in (stop, regenerate, None, rename, settings):
        chat_menu.addSeparator() if act is None else chat_menu.addAction(act)

    view_menu = bar.addMenu("&View")
    view_menu.addAction(window.sidebar_dock.toggleViewAction())
    view_menu.addAction(window.panel_dock.toggleViewAction())
    view_menu.addAction(window.settings_dock.toggleViewAction())
    view_menu.addSeparator()
    highlight = QAction("Highlight tokens from drafts", window)
    highlight.setCheckable(True)
    highlight.setShortcut(QKeySequence("Ctrl+Shift+H"))
    highlight.setChecked(window.panel.highlight.isChecked())
    highlight.toggled.connect(window.set_highlight_drafts)
    window.panel.highlight.toggled.connect(highlight.setChecked)
    window.addAction(highlight)
    view_menu.addAction(highlight)
    theme_menu = view_menu.addMenu("Theme")
    group = QActionGroup(window)
    for mode in THEME_MODES:
        act = QAction(mode.capitalize(), window)
        act.setCheckable(True)
        act.setChecked(mode == theme_manager().mode)
        act.triggered.connect(lambda _c=False, m=mode: window.set_theme_mode(m))
        group.addAction(act)
        theme_menu.addAction(act)

    models_menu = bar.addMenu("&Models")
    models = action("Manage models…", window.show_models, QKeySequence("Ctrl+M"))
    models_menu.addAction(models)

    return Actions(
        new_chat=new_chat,
        close_chat=close_chat,
        stop=stop,
        regenerate=regenerate,
        rename=rename,
        export=export,
        delete=delete,
        settings=settings,
        models=models,
        highlight=highlight,
        quit=quit_action,
    )
