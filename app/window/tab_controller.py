"""The chat tabs' controller: opens, closes, switches and titles the tabs of a QTabWidget, one
ChatTab (with its ChatController) per open conversation, and keeps their order in the store."""

from __future__ import annotations

import asyncio

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QTabWidget

from app.chat.chat_controller import ChatController
from app.chat.chat_tab import ChatTab
from app.engine_bridge import EngineBridge
from app.settings.new_chat_defaults import load_defaults
from app.store.conversation_store import Store
from app.store.records import Conversation
from app.theme import busy_icon
from app.window.tab_bar import RenamableTabBar, distinct_titles

LAST_TAB = 9  # Alt+9 goes to the last tab, as in browsers


class TabController(QObject):
    """Owns the tab list; the window listens to its signals."""

    currentChatChanged = Signal(object)  # ChatController or None
    currentTitleChanged = Signal(str)
    currentBusyChanged = Signal()
    conversationsChanged = Signal()  # the sidebar's list may have changed
    tabAdded = Signal(object)  # ChatTab, for the parts that wire each new tab

    def __init__(self, tabs: QTabWidget, *, store: Store, bridge: EngineBridge, parent=None):
        super().__init__(parent)
        self.tabs = tabs
        self.store = store
        self.bridge = bridge
        self.closing = False  # the window is closing: the last tab is not replaced
        self._highlight = False
        self.tab_bar = RenamableTabBar()
        tabs.setTabBar(self.tab_bar)
        tabs.setDocumentMode(True)
        tabs.tabCloseRequested.connect(self.close_tab)
        tabs.currentChanged.connect(self._current_changed)
        self.tab_bar.tabMoved.connect(lambda _a, _b: self.save_order())
        self.tab_bar.tabRenamed.connect(lambda i, text: self.tab(i).controller.rename(text))
        bridge.modelLoaded.connect(lambda _info: self._models_changed())
        bridge.modelAdded.connect(lambda _info: self._models_changed())

    # -- reading -------------------------------------------------------------------------------

    def tab(self, index: int) -> ChatTab | None:
        return self.tabs.widget(index)

    def chat_tabs(self) -> list[ChatTab]:
        return [self.tab(i) for i in range(self.tabs.count())]

    def current_tab(self) -> ChatTab | None:
        return self.tabs.currentWidget()

    def current_controller(self) -> ChatController | None:
        tab = self.current_tab()
        return tab.controller if tab is not None else None

    def find(self, conversation_id: int) -> ChatTab | None:
        for tab in self.chat_tabs():
            if tab.controller.conversation.id == conversation_id:
                return tab
        return None

    # -- opening and closing -------------------------------------------------------------------

    def new_chat(self) -> ChatTab:
        defaults = load_defaults(self.store)
        conversation = Conversation(
            settings=defaults.settings,
            system_prompt=defaults.system_prompt,
            tab_index=self.tabs.count(),
        )
        self.store.create_conversation(conversation)
        tab = self._add_tab(conversation)
        self.tabs.setCurrentWidget(tab)
        tab.focus_input()
        self.conversationsChanged.emit()
        return tab

    def open_conversation(self, conversation_id: int) -> ChatTab | None:
        tab = self.find(conversation_id)
        if tab is None:
            conversation = self.store.conversation(conversation_id)
            if conversation is None:
                return None
            conversation.is_open = True
            tab = self._add_tab(conversation)
            self.save_order()
            self.conversationsChanged.emit()
        self.tabs.setCurrentWidget(tab)
        return tab

    def restore(self, current_index: int) -> None:
        """Open the tabs that were open last time; select `current_index`."""
        for conversation in self.store.open_conversations():
            self._add_tab(conversation)
        if 0 <= current_index < self.tabs.count():
            self.tabs.setCurrentIndex(current_index)

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
        self.save_order()
        self._retitle()
        self.conversationsChanged.emit()
        if replace_last and self.tabs.count() == 0 and not self.closing:
            self.new_chat()

    def close_current(self) -> None:
        if self.tabs.currentIndex() >= 0:
            self.close_tab(self.tabs.currentIndex())

    def rename_current(self) -> None:
        if self.tabs.currentIndex() >= 0:
            self.tab_bar.edit_tab(self.tabs.currentIndex())

    def save_order(self) -> None:
        for index, tab in enumerate(self.chat_tabs()):
            tab.controller.conversation.tab_index = index
            self.store.set_tab_state(tab.controller.conversation.id, is_open=True, tab_index=index)

    # -- switching -----------------------------------------------------------------------------

    def next_tab(self) -> None:
        self._step(+1)

    def previous_tab(self) -> None:
        self._step(-1)

    def go_to(self, number: int) -> None:
        """Select tab `number` (1-based); LAST_TAB selects the last tab."""
        count = self.tabs.count()
        index = count - 1 if number >= LAST_TAB else number - 1
        if 0 <= index < count:
            self.tabs.setCurrentIndex(index)

    def _step(self, delta: int) -> None:
        count = self.tabs.count()
        if count > 1:
            self.tabs.setCurrentIndex((self.tabs.currentIndex() + delta) % count)

    # -- every tab -----------------------------------------------------------------------------

    def set_highlight_drafts(self, on: bool) -> None:
        self._highlight = on
        for tab in self.chat_tabs():
            tab.set_highlight_drafts(on)

    async def shutdown(self) -> None:
        """Stop every reply; returns once their text is stored."""
        await asyncio.gather(*(tab.controller.shutdown() for tab in self.chat_tabs()))

    def stop_all(self) -> None:
        for tab in self.chat_tabs():
            tab.controller.stop()

    # -- internals -----------------------------------------------------------------------------

    def _add_tab(self, conversation: Conversation) -> ChatTab:
        controller = ChatController(conversation, store=self.store, bridge=self.bridge)
        tab = ChatTab(controller)
        tab.set_highlight_drafts(self._highlight)
        self.tabs.addTab(tab, conversation.title)
        tab.titleChanged.connect(lambda title, t=tab: self._title_changed(t, title))
        controller.busyChanged.connect(lambda t=tab: self._busy_changed(t))
        controller.replyFinished.connect(lambda _reason: self.conversationsChanged.emit())
        controller.settingsChanged.connect(lambda _settings: self._retitle())
        self._retitle()
        self.tabAdded.emit(tab)
        return tab

    def _retitle(self) -> None:
        """Short titles that tell the tabs apart; the tooltip has the full title and the
        chat's model."""
        tabs = self.chat_tabs()
        titles = [tab.controller.conversation.title for tab in tabs]
        for index, (tab, title, short) in enumerate(zip(tabs, titles, distinct_titles(titles))):
            if self.tabs.tabText(index) != short:
                self.tabs.setTabText(index, short)
            self.tabs.setTabToolTip(index, f"{title}\nModel: {tab.controller.model_name}")

    def _models_changed(self) -> None:
        self._retitle()
        for tab in self.chat_tabs():
            tab.refresh_model()

    def _title_changed(self, tab: ChatTab, title: str) -> None:
        self._retitle()
        if tab is self.current_tab():
            self.currentTitleChanged.emit(title)
        self.conversationsChanged.emit()

    def _busy_changed(self, tab: ChatTab) -> None:
        """A dot on the tab while its reply is being written."""
        index = self.tabs.indexOf(tab)
        if index >= 0:
            self.tabs.setTabIcon(index, busy_icon() if tab.controller.busy else QIcon())
        if tab.controller.busy:
            self.conversationsChanged.emit()
        if tab is self.current_tab():
            self.currentBusyChanged.emit()

    def _current_changed(self, _index: int) -> None:
        controller = self.current_controller()
        self.currentChatChanged.emit(controller)
        if controller is not None:
            self.currentTitleChanged.emit(controller.conversation.title)
        self.currentBusyChanged.emit()
