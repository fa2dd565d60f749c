"""The main window: chat tabs in the middle, saved conversations on the left, the live panel and
the chat settings on the right, the model's state in the status bar. It builds the parts and
joins them by signals; each part's logic lives in its own file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QTimer, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QDialog,
    QMainWindow,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.chat.chat_tab import ChatTab
from app.engine_bridge import EngineBridge
from app.formatting import fmt_bytes
from app.models.loaded_models_model import ChatUse
from app.models.models_dialog import ModelsDialog
from app.models.prompt_cache_clearer import PromptCacheClearer
from app.panel.engine_card import DEFAULT_SCOPE
from app.panel.live_panel import LivePanel
from app.remote.remote_backend import RemoteBackend
from app.remote.remote_servers import RemoteServers
from app.remote.server_registry import ServerRegistry
from app.remote.servers_dialog import RemoteServersDialog
from app.settings.settings_form import ChatSettingsForm
from app.sidebar.conversation_sidebar import ConversationSidebar
from app.store.conversation_store import Store
from app.theme import app_icon, theme_manager
from app.widgets.notice_banner import NoticeBanner
from app.window.about_dialog import AboutDialog, about_info
from app.window.conversation_actions import ConversationActions
from app.window.dock_layout import DockLayout
from app.window.history_hooks import HistoryHooks
from app.window.local_server_controller import LocalServerController
from app.window.local_server_dialog import LocalServerDialog
from app.window.menus import build_menus
from app.window.settings_controller import SettingsController
from app.window.shortcuts_dialog import ShortcutsDialog
from app.window.status_bar import EngineStatusBar
from app.window.tab_controller import TabController

DEFAULT_WINDOW_SIZE = (1360, 860)
APP_TITLE = "Tandem"
ENGINE_SCOPE_KEY = "panel_engine_scope"


class MainWindow(QMainWindow):
    """Tandem's window over one store and one engine."""

    currentChatChanged = Signal(object)  # ChatController or None

    def __init__(self, store: Store, bridge: EngineBridge, *, restore: bool = True) -> None:
        super().__init__()
        self.store = store
        self.bridge = bridge
        self.setWindowTitle(APP_TITLE)
        self.setWindowIcon(app_icon())
        self.resize(*DEFAULT_WINDOW_SIZE)
        self._dialogs: dict[str, QWidget] = {}

        self.tabs = QTabWidget()
        self.tabs.setObjectName("ChatTabs")
        self.chats = TabController(self.tabs, store=store, bridge=bridge, parent=self)
        self.tab_bar = self.chats.tab_bar
        self.engine_banner = NoticeBanner("danger", inline_buttons=True)
        self.engine_banner.setVisible(False)
        self.restart_button = self.engine_banner.add_button(
            "Restart engine", self.restart_engine, tip="Start the engine again with its model"
        )
        central = QWidget()
        column = QVBoxLayout(central)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        self.engine_banner.setProperty("placement", "top")
        column.addWidget(self.engine_banner)
        column.addWidget(self.tabs, 1)
        self.setCentralWidget(central)

        self.sidebar = ConversationSidebar(store)
        self.panel = LivePanel()
        self.panel.highlight.setChecked(bool(store.setting("highlight_drafts", False)))
        self.panel.engine_card.set_scope(store.setting(ENGINE_SCOPE_KEY, DEFAULT_SCOPE))
        self.settings_form = ChatSettingsForm()
        self.docks = DockLayout(
            self, sidebar=self.sidebar, panel=self.panel, settings=self.settings_form
        )
        self.sidebar_dock = self.docks.sidebar_dock
        self.panel_dock = self.docks.panel_dock
        self.settings_dock = self.docks.settings_dock

        self.status = EngineStatusBar(bridge)
        self.setStatusBar(self.status)
        bridge.remote = RemoteBackend(ServerRegistry(store))  # this window's store's servers
        self.remote_servers = RemoteServers(bridge.remote, self)
        self.settings = SettingsController(
            self.settings_form,
            tabs=self.chats,
            store=store,
            bridge=bridge,
            status=self.status,
            remote=self.remote_servers,
        )
        self.conversations = ConversationActions(
            self, store=store, tabs=self.chats, status=self.status
        )
        self.cache_clearer = PromptCacheClearer(bridge, self)
        self.history = HistoryHooks(self)
        self.local_server = LocalServerController(bridge, store, self)
        self.menu_actions = build_menus(self)
        self._connect()
        self.chats.set_highlight_drafts(self.panel.highlight.isChecked())
        QTimer.singleShot(0, self, self.settings.refresh_models)
        if self.remote_servers.servers():
            QTimer.singleShot(0, self, self.remote_servers.refresh)

        if restore:
            self._restore()
            self.local_server.restore()
        if self.chats.tabs.count() == 0:
            self.new_chat()

    def _connect(self) -> None:
        chats, panel, bridge = self.chats, self.panel, self.bridge
        chats.currentChatChanged.connect(panel.set_chat)
        chats.currentChatChanged.connect(self.currentChatChanged)
        chats.currentTitleChanged.connect(lambda t: self.setWindowTitle(f"{t} — {APP_TITLE}"))
        chats.currentBusyChanged.connect(self._busy_changed)
        chats.conversationsChanged.connect(self.sidebar.refresh)
        chats.tabAdded.connect(self.history.attach)
        self.conversations.deleted.connect(lambda _id: self.sidebar.refresh())
        self.sidebar.openRequested.connect(self.open_conversation)
        self.sidebar.exportRequested.connect(self.export_dialog)
        self.sidebar.deleteRequested.connect(self.delete_conversation)
        self.sidebar.newRequested.connect(self.new_chat)
        panel.highlight.toggled.connect(self.set_highlight_drafts)
        panel.chat_card.methodChosen.connect(self.settings.switch_method)
        panel.engine_card.scopeChanged.connect(
            lambda s: self.store.set_setting(ENGINE_SCOPE_KEY, s)
        )
        panel.cache_card.clearRequested.connect(lambda: self.cache_clearer.ask(self))
        self.cache_clearer.cleared.connect(
            lambda n: self._cache_message(f"Prompt cache cleared: {fmt_bytes(n)} freed")
        )
        self.cache_clearer.failed.connect(lambda m: self._cache_message(m, error=True))
        bridge.statsUpdated.connect(panel.update_engine)
        bridge.engineFailed.connect(self._engine_failed)
        bridge.modelLoaded.connect(lambda _info: self.engine_banner.setVisible(False))
        bridge.modelLoaded.connect(lambda _info: panel.chat_card.refresh_model())
        bridge.modelAdded.connect(lambda _info: panel.chat_card.refresh_model())
        bridge.loadFailed.connect(self._restart_failed)
        server = self.local_server
        server.stateChanged.connect(self.status.set_server)
        server.stateChanged.connect(lambda on, _url: self.menu_actions.local_server.setChecked(on))
        server.failed.connect(lambda m: self.status.show_message(m, error=True))
        server.statsChanged.connect(panel.engine_card.set_server_stats)

    # -- tabs ----------------------------------------------------------------------------------

    def tab(self, index: int) -> ChatTab | None:
        return self.chats.tab(index)

    def chat_tabs(self) -> list[ChatTab]:
        return self.chats.chat_tabs()

    def current_tab(self) -> ChatTab | None:
        return self.chats.current_tab()

    def new_chat(self) -> ChatTab:
        return self.chats.new_chat()

    def open_conversation(self, conversation_id: int) -> ChatTab | None:
        return self.chats.open_conversation(conversation_id)

    def close_tab(self, index: int, *, replace_last: bool = True) -> None:
        self.chats.close_tab(index, replace_last=replace_last)

    def close_current_tab(self) -> None:
        self.chats.close_current()

    def rename_current_tab(self) -> None:
        self.chats.rename_current()

    def _busy_changed(self) -> None:
        controller = self.chats.current_controller()
        self.menu_actions.stop.setEnabled(bool(controller and controller.busy))

    # -- chat actions --------------------------------------------------------------------------

    def stop_current(self) -> None:
        tab = self.current_tab()
        if tab is not None:
            tab.stop()

    def regenerate_current(self) -> None:
        controller = self.chats.current_controller()
        if controller is not None:
            controller.regenerate()

    def set_highlight_drafts(self, on: bool) -> None:
        self.store.set_setting("highlight_drafts", bool(on))
        if self.panel.highlight.isChecked() != on:
            self.panel.highlight.setChecked(on)
        self.chats.set_highlight_drafts(on)

    def show_settings(self) -> None:
        self.settings_dock.show()
        self.settings_dock.raise_()

    # -- conversations -------------------------------------------------------------------------

    def export_conversation(self, conversation_id: int, path: str | Path) -> Path:
        return self.conversations.export(conversation_id, path)

    def export_dialog(self, conversation_id: int | None = None) -> None:
        self.conversations.export_dialog(conversation_id)

    def delete_conversation(self, conversation_id: int, *, confirm: bool = True) -> None:
        self.conversations.delete(conversation_id, confirm=confirm)

    def delete_current(self) -> None:
        self.conversations.delete_current()

    # -- models, help, the engine --------------------------------------------------------------

    def show_models(self) -> ModelsDialog:
        def make() -> ModelsDialog:
            dialog = ModelsDialog(
                self.bridge, self.store, self.cache_clearer, self, chats=self._chat_uses
            )
            dialog.modelsChanged.connect(lambda _entries: self.settings.refresh_models())
            return dialog

        return self._show_kept("models", make)

    def show_local_server(self) -> LocalServerDialog:
        """Models ▸ Local server settings…: on/off, where it listens, its API key."""
        return self._show_kept("local_server", lambda: LocalServerDialog(self.local_server, self))

    def show_remote_servers(self) -> RemoteServersDialog:
        return self._show_kept("remote", lambda: RemoteServersDialog(self.remote_servers, self))

    def _show_kept(self, name: str, make: Callable[[], QDialog]) -> QDialog:
        """A modeless dialog made once and kept: refreshed and brought to the front."""
        dialog = self._dialogs.get(name)
        if dialog is None:
            dialog = self._dialogs[name] = make()
        dialog.refresh()
        dialog.show()
        dialog.raise_()
        return dialog

    def _chat_uses(self) -> list[ChatUse]:
        """Every open chat's title, model setting and running request (for the Models window)."""
        return [
            ChatUse(
                t.controller.conversation.title,
                t.controller.settings.model,
                t.controller.request_id,
            )
            for t in self.chat_tabs()
        ]

    def show_shortcuts(self) -> ShortcutsDialog:
        dialog = ShortcutsDialog(self.menuBar(), self)
        return self._open("shortcuts", dialog)

    def show_about(self) -> AboutDialog:
        return self._open("about", AboutDialog(about_info(self.bridge.stats()), self))

    def restart_engine(self) -> None:
        self.engine_banner.set_message("Restarting the engine and loading its model…")
        self.restart_button.setEnabled(False)
        self.bridge.restart()

    def _engine_failed(self, message: str) -> None:
        self.engine_banner.set_kind("danger")
        said = message[:1].upper() + message[1:].rstrip(".")
        self.engine_banner.set_message(
            f"{said}. Replies being written were stopped; their text so far is kept.",
            title="The engine stopped",
        )
        self.restart_button.setEnabled(True)
        self.engine_banner.setVisible(True)

    def _restart_failed(self, message: str) -> None:
        if self.engine_banner.isVisible():
            self.engine_banner.set_message(f"The engine could not start again: {message}")
            self.restart_button.setEnabled(True)

    def _cache_message(self, text: str, *, error: bool = False) -> None:
        self.panel.cache_card.show_result(text)
        self.status.show_message(text, error=error)

    def _open(self, name: str, dialog: QWidget) -> QWidget:
        previous = self._dialogs.pop(name, None)
        if previous is not None:
            previous.close()
            previous.deleteLater()
        self._dialogs[name] = dialog
        dialog.open()
        return dialog

    # -- life cycle ----------------------------------------------------------------------------

    def _restore(self) -> None:
        self.chats.restore(int(self.store.setting("current_tab", 0) or 0))
        self.docks.restore(
            self.store.setting("window_geometry"), self.store.setting("window_state")
        )
        theme_manager().apply(self.store.setting("theme_mode", "system"))
        if self.store.recovered:
            n = self.store.recovered
            self.status.show_message(
                f"{n} repl{'ies were' if n != 1 else 'y was'} interrupted when Tandem last closed; "
                "the text written so far is kept."
            )
        self.history.show_damage()

    def set_theme_mode(self, mode: str) -> None:
        self.store.set_setting("theme_mode", mode)
        theme_manager().apply(mode)

    def bring_to_front(self) -> None:
        """Another launch of Tandem asked for this window."""
        if self.isMinimized():
            self.showNormal()
        self.show()
        self.raise_()
        self.activateWindow()

    def save_state(self) -> None:
        self.chats.save_order()
        self.store.set_setting("current_tab", self.tabs.currentIndex())
        self.store.set_setting("window_geometry", self.docks.saved_geometry())
        self.store.set_setting("window_state", self.docks.saved_state())

    async def shutdown(self) -> None:
        """Stop the local server and every reply, and wait until their text is stored."""
        await self.local_server.stop()
        await self.chats.shutdown()
        await self.remote_servers.close()

    def closeEvent(self, event: QCloseEvent) -> None:
        self.chats.closing = True
        self.save_state()
        self.chats.stop_all()
        super().closeEvent(event)
