"""The main window's menus, actions and keyboard shortcuts (the Help menu's shortcut list is made
from these actions)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QApplication

from app.theme import THEME_MODES, theme_manager
from app.window.tab_controller import LAST_TAB

if TYPE_CHECKING:
    from app.window.main_window import MainWindow


@dataclass
class Actions:
    """Every action of the main window, by what it does."""

    new_chat: QAction
    close_chat: QAction
    stop: QAction
    regenerate: QAction
    rename: QAction
    export: QAction
    delete: QAction
    settings: QAction
    models: QAction
    local_server: QAction
    highlight: QAction
    quit: QAction
    next_chat: QAction
    previous_chat: QAction
    go_to_chat: list[QAction] = field(default_factory=list)  # Alt+1 … Alt+9 (the last)
    shortcuts: QAction | None = None
    about: QAction | None = None


def build_menus(window: MainWindow) -> Actions:
    bar = window.menuBar()
    tabs = window.chats

    def action(text: str, slot, *shortcuts, tip: str = "") -> QAction:
        act = QAction(text, window)
        keys = [QKeySequence(s) for s in shortcuts]
        if any(not k.isEmpty() for k in keys):
            act.setShortcuts([k for k in keys if not k.isEmpty()])
        if tip:
            act.setStatusTip(tip)
        act.triggered.connect(lambda _checked=False: slot())
        window.addAction(act)  # shortcuts work with the menu bar hidden too
        return act

    def fill(menu, *actions) -> None:
        for act in actions:
            menu.addSeparator() if act is None else menu.addAction(act)

    file_menu = bar.addMenu("&File")
    new_chat = action("New chat", window.new_chat, "Ctrl+T", "Ctrl+N")
    close_chat = action("Close chat", window.close_current_tab, "Ctrl+W")
    export = action("Export chat to Markdown…", window.export_dialog, "Ctrl+E")
    export_all = action("Export all chats to Markdown…", window.history.export_all)
    delete = action("Delete chat…", window.delete_current)
    quit_action = action("Quit", QApplication.closeAllWindows, "Ctrl+Q")  # Cmd+Q on macOS
    fill(file_menu, new_chat, close_chat, None, export, export_all, delete, None, quit_action)

    chat_menu = bar.addMenu("&Chat")
    stop = action("Stop reply", window.stop_current, QKeySequence.StandardKey.Cancel)
    stop.setEnabled(False)
    regenerate = action("Regenerate reply", window.regenerate_current, "Ctrl+R")
    rename = action("Rename chat", window.rename_current_tab, "F2")
    settings = action("Chat settings", window.show_settings, "Ctrl+,")
    fill(chat_menu, stop, regenerate, None, rename, settings)

    view_menu = bar.addMenu("&View")
    for dock in window.docks.docks():
        view_menu.addAction(dock.toggleViewAction())
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

    tabs_menu = bar.addMenu("&Tabs")
    next_chat = action("Next chat", tabs.next_tab, "Ctrl+PgDown")
    previous_chat = action("Previous chat", tabs.previous_tab, "Ctrl+PgUp")
    go_to = [action(f"Chat {n}", lambda n=n: tabs.go_to(n), f"Alt+{n}") for n in range(1, LAST_TAB)]
    go_to.append(action("Last chat", lambda: tabs.go_to(LAST_TAB), f"Alt+{LAST_TAB}"))
    fill(tabs_menu, next_chat, previous_chat, None, *go_to)

    models_menu = bar.addMenu("&Models")
    models = action("Manage models…", window.show_models, "Ctrl+M")
    local_server = QAction("Local server (OpenAI API)", window)
    local_server.setCheckable(True)
    local_server.setStatusTip(
        "Serve the loaded models to editors and scripts (an OpenAI-compatible API); "
        "their requests join the chats' batch"
    )
    local_server.toggled.connect(
        lambda on: on != window.local_server.running and window.local_server.set_enabled(on)
    )
    server_settings = action("Local server settings…", window.show_local_server)
    server_settings.setStatusTip(
        "Where the local server listens, its port, the API key its clients must send"
    )
    remote = action("Remote servers…", window.show_remote_servers)
    remote.setStatusTip("Chat with models on OpenAI-compatible servers elsewhere")
    fill(models_menu, models, remote, None, local_server, server_settings)

    help_menu = bar.addMenu("&Help")
    shortcuts = action("Keyboard shortcuts", window.show_shortcuts, "F1", "Ctrl+/")
    about = action("About Tandem", window.show_about)
    fill(help_menu, shortcuts, about)

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
        local_server=local_server,
        highlight=highlight,
        quit=quit_action,
        next_chat=next_chat,
        previous_chat=previous_chat,
        go_to_chat=go_to,
        shortcuts=shortcuts,
        about=about,
    )
