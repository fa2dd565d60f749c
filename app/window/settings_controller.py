"""The settings dock's controller: the form edits the current chat's settings (its model and
draft model too: they apply from the chat's next reply, which loads them if needed, and never
touch another chat), and the defaults for new chats are saved."""

from __future__ import annotations

from PySide6.QtCore import QObject

from app.chat.chat_controller import ChatController
from app.engine_bridge import EngineBridge
from app.models.model_catalog import list_models
from app.models.models_dialog import MODEL_DIRS_KEY
from app.remote.remote_servers import RemoteServers
from app.settings.chat_settings import SPEC_METHOD_LABELS, ChatSettings
from app.settings.new_chat_defaults import load_defaults, save_default_system_prompt
from app.settings.settings_form import ChatSettingsForm
from app.store.conversation_store import Store
from app.window.status_bar import EngineStatusBar
from app.window.tab_controller import TabController


class SettingsController(QObject):
    """Joins the ChatSettingsForm to the current chat, the store and the engine."""

    def __init__(
        self,
        form: ChatSettingsForm,
        *,
        tabs: TabController,
        store: Store,
        bridge: EngineBridge,
        status: EngineStatusBar,
        remote: RemoteServers | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.form = form
        self._tabs = tabs
        self._store = store
        self._bridge = bridge
        self._status = status
        self._remote = remote
        if remote is not None:
            remote.modelsChanged.connect(self.refresh_models)
        form.settingsEdited.connect(self._edited)
        form.saveAsDefault.connect(self._save_default)
        form.resetRequested.connect(self._reset)
        form.draftRefused.connect(lambda message: status.show_message(message, error=True))
        form.defaultSystemPromptEdited.connect(self._save_system_prompt)
        form.set_default_system_prompt(load_defaults(store).system_prompt)
        tabs.currentChatChanged.connect(self._chat_changed)
        bridge.modelLoaded.connect(form.set_target)
        form.set_target(bridge.model_info)

    def refresh_models(self) -> None:
        local = list_models(list(self._store.setting(MODEL_DIRS_KEY, [])))
        self.form.set_models(local + (self._remote.entries() if self._remote else []))

    def switch_method(self, method: str) -> None:
        """Use speculative `method` in the current chat from its next reply."""
        controller = self._tabs.current_controller()
        if controller is None:
            return
        controller.set_settings(controller.settings.replace(spec_method=method))
        self.form.set_settings(controller.settings)
        label = SPEC_METHOD_LABELS[controller.settings.spec_method]
        self._status.show_message(f"Speculation for this chat: {label}, from its next reply")

    # -- internals -----------------------------------------------------------------------------

    def _chat_changed(self, controller: ChatController | None) -> None:
        if controller is not None:
            self.form.set_settings(controller.settings)

    def _edited(self, settings: ChatSettings) -> None:
        controller = self._tabs.current_controller()
        if controller is None:
            return
        controller.set_settings(settings)

    def _save_default(self, settings: ChatSettings) -> None:
        self._store.set_default_chat_settings(settings)
        self._status.show_message("Saved as the default for new chats")

    def _save_system_prompt(self, text: str) -> None:
        save_default_system_prompt(self._store, text)

    def _reset(self) -> None:
        controller = self._tabs.current_controller()
        if controller is not None:
            controller.set_settings(self._store.default_chat_settings())
            self.form.set_settings(controller.settings)
