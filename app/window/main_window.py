"""The main window: chat tabs in the middle, saved conversations on the left, the live panel and
the chat settings on the right, the model's state in the status bar."""

from __future__ import annotations

import asyncio
from pathlib import Path

from PySide6.QtCore import QByteArray, Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent, QIcon
from PySide6.QtWidgets import QDockWidget, QMainWindow, QTabWidget, QWidget

from app.chat.chat_controller import ChatController
from app.chat.chat_tab import ChatTab
from app.engine_bridge import EngineBridge
from app.models.model_catalog import list_models
from app.models.models_dialog import MODEL_DIRS_KEY, ModelsDialog
from app.panel.live_panel import LivePanel
from app.settings.settings_form import ChatSettingsForm
from app.sidebar.conversation_sidebar import ConversationSidebar
from app.store.conversation_store import Store
from app.store.export import to_markdown
from app.store.records import Conversation
from app.theme import app_icon, busy_icon, theme_manager
from app.window.history_hooks import HistoryHooks
from app.window.menus import build_menus
from app.window.status_bar import EngineStatusBar
from app.window.tab_bar import RenamableTabBar, tab_title

DEFAULT_WINDOW_SIZE = (1360, 860)
APP_TITLE = "Tandem"


class MainWindow(QMainWindow):
    currentChatChanged = Signal(object)  # ChatController or None

    def __init__(self, store: Store, bridge: EngineBridge, *, restore: bool = True) -> None:
        super().__init__()
        self.store = store
        self.bridge = bridge
        self.setWindowTitle(APP_TITLE)
        self.setWindowIcon(app_icon())
        self.resize(*DEFAULT_WINDOW_SIZE)
        self.setDockNestingEnabled(True)
        self._closing = False
        self._models_dialog: ModelsDialog | None = None
        self._tasks: set[asyncio.Task] = set()

        self.tabs = QTabWidget()
        self.tabs.setObjectName("ChatTabs")
        self.tab_bar = RenamableTabBar()
        self.tabs.setTabBar(self.tab_bar)
        self.tabs.setDocumentMode(True)
        self.tabs.tabCloseRequested.connect(lambda i: self.close_tab(i))
        self.tabs.currentChanged.connect(self._current_changed)
        self.tab_bar.tabMoved.connect(lambda _a, _b: self._save_tab_order())
        self.tab_bar.tabRenamed.connect(lambda i, text: self.tab(i).controller.rename(text))
        self.setCentralWidget(self.tabs)

        self.sidebar = ConversationSidebar(store)
        self.sidebar.openRequested.connect(self.open_conversation)
        self.sidebar.exportRequested.connect(self.export_dialog)
        self.sidebar.deleteRequested.connect(self.delete_conversation)
        self.sidebar.newRequested.connect(self.new_chat)
        self.sidebar_dock = self._dock("Conversations", "ConversationsDock", self.sidebar,
                                       Qt.DockWidgetArea.LeftDockWidgetArea)  # fmt: skip

        self.panel = LivePanel()
        self.panel.highlight.setChecked(bool(store.setting("highlight_drafts", False)))
        self.panel.highlight.toggled.connect(self.set_highlight_drafts)
        self.panel_dock = self._dock(
            "Live", "LiveDock", self.panel, Qt.DockWidgetArea.RightDockWidgetArea
        )

        self.settings_form = ChatSettingsForm()
        self.settings_form.settingsEdited.connect(self._settings_edited)
        self.settings_form.saveAsDefault.connect(self._save_default_settings)
        self.settings_form.resetRequested.connect(self._reset_settings)
        self.settings_form.draftRefused.connect(lambda m: self.status.show_message(m, error=True))
        self.settings_dock = self._dock("Chat settings", "SettingsDock", self.settings_form,
                                        Qt.DockWidgetArea.RightDockWidgetArea)  # fmt: skip
        self.tabifyDockWidget(self.panel_dock, self.settings_dock)
        self.setTabPosition(Qt.DockWidgetArea.RightDockWidgetArea, QTabWidget.TabPosition.North)
        for dock in (self.panel_dock, self.settings_dock):
            dock.setTitleBarWidget(QWidget())  # the tabs above them name them
        self.panel_dock.raise_()
        self.resizeDocks(
            [self.sidebar_dock, self.panel_dock], [260, 340], Qt.Orientation.Horizontal
        )

        self.status = EngineStatusBar(bridge)
        self.setStatusBar(self.status)
        self.history = HistoryHooks(self)
        self.menu_actions = build_menus(self)

        bridge.statsUpdated.connect(self.panel.update_engine)
        bridge.modelLoaded.connect(self.settings_form.set_target)
        bridge.loadFailed.connect(self._load_failed)
        self.settings_form.set_target(bridge.model_info)
        QTimer.singleShot(0, self.refresh_models)

        if restore:
            self._restore()
        if self.tabs.count() == 0:
            self.new_chat()

    # -- tabs ----------------------------------------------------------------------------------

    def tab(self, index: int) -> ChatTab:
        return self.tabs.widget(index)

    def chat_tabs(self) -> list[ChatTab]:
        return [self.tab(i) for i in range(self.tabs.count())]

    def current_tab(self) -> ChatTab | None:
        return self.tabs.currentWidget()

    def new_chat(self) -> ChatTab:
        conversation = Conversation(
            settings=self.store.default_chat_settings(), tab_index=self.tabs.count()
        )
        self.store.create_conversation(conversation)
        tab = self._add_tab(conversation)
        self.tabs.setCurrentWidget(tab)
        tab.focus_input()
        self.sidebar.refresh()
        return tab

    def open_conversation(self, conversation_id: int) -> ChatTab | None:
        for tab in self.chat_tabs():
            if tab.controller.conversation.id == conversation_id:
                self.tabs.setCurrentWidget(tab)
                return tab
        conversation = self.store.conversation(conversation_id)
        if conversation is None:
            return None
        conversation.is_open = True
        tab = self._add_tab(conversation)
        self.tabs.setCurrentWidget(tab)
        self._save_tab_order()
        self.sidebar.refresh()
        return tab

    def close_tab(self, index: int, *, replace_last: bool = True) -> None:
        """Close a tab; a running reply is cancelled (its text so far is kept)."""
        tab = self.tab(index)
        if tab is None:
            return
        controller = tab.controller
        self.tabs.removeTab(index)
        tab.setParent(None)
        self.store.set_tab_state(controller.conversation.id, is_open=False)
        controller.closed.connect(tab.deleteLater)
        controller.close()
        self._save_tab_order()
        self.sidebar.refresh()
        if replace_last and self.tabs.count() == 0 and not self._closing:
            self.new_chat()

    def close_current_tab(self) -> None:
        if self.tabs.currentIndex() >= 0:
            self.close_tab(self.tabs.currentIndex())

    def rename_current_tab(self) -> None:
        if self.tabs.currentIndex() >= 0:
            self.tab_bar.edit_tab(self.tabs.currentIndex())

    def _add_tab(self, conversation: Conversation) -> ChatTab:
        controller = ChatController(conversation, store=self.store, bridge=self.bridge)
        tab = ChatTab(controller)
        tab.set_highlight_drafts(self.panel.highlight.isChecked())
        index = self.tabs.addTab(tab, tab_title(conversation.title))
        self.tabs.setTabToolTip(index, conversation.title)
        tab.titleChanged.connect(lambda title, t=tab: self._title_changed(t, title))
        controller.busyChanged.connect(self._busy_changed)
        controller.busyChanged.connect(lambda t=tab: self._tab_busy(t))
        controller.replyFinished.connect(lambda _r: self.sidebar.refresh())
        self.history.attach(tab)
        return tab

    def _tab_busy(self, tab: ChatTab) -> None:
        """A dot on the tab while its reply is being written."""
        index = self.tabs.indexOf(tab)
        if index >= 0:
            self.tabs.setTabIcon(index, busy_icon() if tab.controller.busy else QIcon())
        if tab.controller.busy:
            self.sidebar.refresh()

    def _title_changed(self, tab: ChatTab, title: str) -> None:
        index = self.tabs.indexOf(tab)
        if index >= 0:
            self.tabs.setTabText(index, tab_title(title))
            self.tabs.setTabToolTip(index, title)
        if tab is self.current_tab():
            self.setWindowTitle(f"{title} — {APP_TITLE}")
        self.sidebar.refresh()

    def _current_changed(self, _index: int) -> None:
        tab = self.current_tab()
        controller = tab.controller if tab else None
        self.panel.set_chat(controller)
        if controller is not None:
            self.settings_form.set_settings(controller.settings)
            self.setWindowTitle(f"{controller.conversation.title} — {APP_TITLE}")
        self._busy_changed()
        self.currentChatChanged.emit(controller)

    def _busy_changed(self) -> None:
        tab = self.current_tab()
        self.menu_actions.stop.setEnabled(bool(tab and tab.controller.busy))

    def _save_tab_order(self) -> None:
        for index, tab in enumerate(self.chat_tabs()):
            tab.controller.conversation.tab_index = index
            self.store.set_tab_state(tab.controller.conversation.id, is_open=True, tab_index=index)

    # -- chat actions --------------------------------------------------------------------------

    def stop_current(self) -> None:
        tab = self.current_tab()
        if tab is not None:
            tab.stop()

    def regenerate_current(self) -> None:
        tab = self.current_tab()
        if tab is not None:
            tab.controller.regenerate()

    def set_highlight_drafts(self, on: bool) -> None:
        self.store.set_setting("highlight_drafts", bool(on))
        if self.panel.highlight.isChecked() != on:
            self.panel.highlight.setChecked(on)
        for tab in self.chat_tabs():
            tab.set_highlight_drafts(on)

    def _settings_edited(self, settings) -> None:
        tab = self.current_tab()
        if tab is None:
            return
        previous = tab.controller.settings
        tab.controller.set_settings(settings)
        if settings.draft_model and settings.draft_model != previous.draft_model:
            task = asyncio.ensure_future(
                self._verify_draft(tab, settings.draft_model, previous.draft_model)
            )
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _verify_draft(self, tab: ChatTab, path: str, previous: str | None) -> None:
        """Load the chosen draft model; if the engine refuses it, undo the choice and say why."""
        try:
            await self.bridge.load_draft_model(path)
        except Exception as exc:  # noqa: BLE001 - the reason is shown to the user
            if tab.controller.settings.draft_model == path:
                tab.controller.set_settings(tab.controller.settings.replace(draft_model=previous))
                if tab is self.current_tab():
                    self.settings_form.set_settings(tab.controller.settings)
            message = f"Draft model refused: {exc}"
            self.settings_form.show_draft_error(message)
            self.status.show_message(message, error=True)

    def _save_default_settings(self, settings) -> None:
        self.store.set_default_chat_settings(settings)
        self.status.show_message("Saved as the default for new chats")

    def _reset_settings(self) -> None:
        tab = self.current_tab()
        if tab is not None:
            tab.controller.set_settings(self.store.default_chat_settings())
            self.settings_form.set_settings(tab.controller.settings)

    def show_settings(self) -> None:
        self.settings_dock.show()
        self.settings_dock.raise_()

    # -- conversations -------------------------------------------------------------------------

    def export_conversation(self, conversation_id: int, path: str | Path) -> Path:
        conversation = self.store.conversation(conversation_id)
        text = to_markdown(conversation, self.store.messages(conversation_id))
        path = Path(path)
        path.write_text(text, encoding="utf-8")
        self.status.show_message(f"Exported to {path}")
        return path

    def export_dialog(self, conversation_id: int | None = None) -> None:
        if conversation_id is None:
            tab = self.current_tab()
            if tab is None:
                return
            conversation_id = tab.controller.conversation.id
        self.history.export_chat(conversation_id)

    def delete_conversation(self, conversation_id: int, *, confirm: bool = True) -> None:
        if confirm:
            self.history.confirm_delete(conversation_id)
            return
        for index, tab in enumerate(self.chat_tabs()):
            if tab.controller.conversation.id == conversation_id:
                self.close_tab(index)
                break
        self.store.delete_conversation(conversation_id)
        self.sidebar.refresh()

    def delete_current(self) -> None:
        tab = self.current_tab()
        if tab is not None:
            self.delete_conversation(tab.controller.conversation.id)

    # -- models --------------------------------------------------------------------------------

    def show_models(self) -> ModelsDialog:
        if self._models_dialog is None:
            self._models_dialog = ModelsDialog(self.bridge, self.store, self)
            self._models_dialog.modelsChanged.connect(self.settings_form.set_models)
        self._models_dialog.refresh()
        self._models_dialog.show()
        self._models_dialog.raise_()
        return self._models_dialog

    def refresh_models(self) -> None:
        self.settings_form.set_models(list_models(list(self.store.setting(MODEL_DIRS_KEY, []))))

    def _load_failed(self, message: str) -> None:
        self.status.show_message(f"Model failed to load: {message}", error=True)

    # -- life cycle ----------------------------------------------------------------------------

    def _restore(self) -> None:
        for conversation in self.store.open_conversations():
            self._add_tab(conversation)
        index = int(self.store.setting("current_tab", 0) or 0)
        if 0 <= index < self.tabs.count():
            self.tabs.setCurrentIndex(index)
        geometry = self.store.setting("window_geometry")
        state = self.store.setting("window_state")
        if geometry:
            self.restoreGeometry(QByteArray.fromBase64(geometry.encode()))
        if state:
            self.restoreState(QByteArray.fromBase64(state.encode()))
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

    def save_state(self) -> None:
        self._save_tab_order()
        self.store.set_setting("current_tab", self.tabs.currentIndex())
        self.store.set_setting("window_geometry", self.saveGeometry().toBase64().data().decode())
        self.store.set_setting("window_state", self.saveState().toBase64().data().decode())

    async def shutdown(self) -> None:
        """Stop every reply and wait until their text is stored."""
        await asyncio.gather(*(tab.controller.shutdown() for tab in self.chat_tabs()))

    def closeEvent(self, event: QCloseEvent) -> None:
        self._closing = True
        self.save_state()
        for tab in self.chat_tabs():
            tab.controller.stop()
        super().closeEvent(event)

    def _dock(self, title: str, name: str, widget, area: Qt.DockWidgetArea) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(name)
        dock.setWidget(widget)
        dock.setFeatures(
            QDockWidget.DockWidgetFeature.DockWidgetClosable
            | QDockWidget.DockWidgetFeature.DockWidgetMovable
        )
        self.addDockWidget(area, dock)
        return dock
