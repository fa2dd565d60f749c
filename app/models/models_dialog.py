"""The Models window: the models the engine holds (memory, state, the chats that use each;
unload and pin), the models found (built in, Hugging Face cache, added folders) to load next to
them or to make the default, clear errors for folders that are not models, and the prompt
cache's size on disk (with "Clear prompt cache")."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)

from app.engine_bridge import EngineBridge
from app.formatting import fmt_bytes, fmt_count
from app.models.loaded_models_model import ChatUse
from app.models.loaded_models_panel import LoadedModelsPanel
from app.models.model_catalog import ModelEntry, list_models, validate_folder
from app.models.mtp_weights import MTP_WEIGHTS_KEY, check_mtp_weights
from app.models.prompt_cache_clearer import PromptCacheClearer
from app.store.conversation_store import Store
from app.widgets.folder_dialog import open_folder_dialog
from engine.engine_reports import EngineStats, ModelInfo

MODEL_DIRS_KEY = "model_dirs"
COLUMNS = ("Name", "Source", "Size", "MTP", "Draft head", "Location")
MTP_TEXT = "MTP layers"  # the checkpoint carries multi-token-prediction layers
MTP_TIP = 'Its checkpoint carries MTP layers: the speculative method "MTP" drafts with them'
HEAD_TEXT = "Trained"  # Tandem ships a draft head trained for this model
HEAD_TIP = (
    'Tandem ships a draft head trained for this model: the methods "Draft model" and "Auto" '
    "draft with it when no draft model is chosen"
)
SEPARATE_MTP_TEXT = "MTP layers (separate file)"


class ModelsDialog(QDialog):
    """See, load, unload and pin models; add folders; see and clear the prompt cache."""

    modelsChanged = Signal(list)  # list[ModelEntry], after a refresh

    def __init__(
        self,
        bridge: EngineBridge,
        store: Store,
        clearer: PromptCacheClearer,
        parent=None,
        *,
        chats: Callable[[], list[ChatUse]] = list,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Models")
        self.resize(820, 620)
        self._bridge = bridge
        self._store = store
        self._chats = chats  # the open chats: which model each uses
        self.entries: list[ModelEntry] = []
        self.loaded_panel = LoadedModelsPanel()
        self.loaded_panel.unloadRequested.connect(bridge.request_unload)
        self.loaded_panel.pinRequested.connect(bridge.request_pin)

        self.loaded = QLabel()
        self.loaded.setWordWrap(True)
        self.loaded.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.setAlternatingRowColors(True)
        self.table.setShowGrid(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.table.doubleClicked.connect(lambda _i: self.load_selected())
        self.error = QLabel()
        self.error.setObjectName("ErrorLabel")
        self.error.setWordWrap(True)
        self.error.setVisible(False)
        self.progress = QProgressBar()
        self.progress.setTextVisible(False)
        self.progress.setVisible(False)
        self.progress_label = QLabel()
        self.progress_label.setObjectName("Hint")

        add = QPushButton("Add folder…")
        add.clicked.connect(self._browse)
        refresh = QPushButton("Refresh")
        refresh.clicked.connect(self.refresh)
        self.load_button = QPushButton("Load")
        self.load_button.setObjectName("PrimaryButton")
        self.load_button.setToolTip("Load it next to the others (chats that use it start at once)")
        self.load_button.clicked.connect(self.load_selected)
        self.default_button = QPushButton("Make default")
        self.default_button.setToolTip(
            'Chats set to "Default model" use it from their next reply; nothing is cancelled'
        )
        self.default_button.clicked.connect(self.make_selected_default)
        self.mtp_button = QPushButton("MTP weights…")
        self.mtp_button.setToolTip(
            "Point the selected model at a safetensors file holding its MTP layers "
            "(converted folders often lack them); used from Tandem's next start"
        )
        self.mtp_button.clicked.connect(self._browse_mtp)
        close = QPushButton("Close")
        close.clicked.connect(self.close)
        self._clearer = clearer
        self.cache_label = QLabel()
        self.cache_label.setToolTip("Cached prompts kept on disk between runs")
        self.clear_cache_button = QPushButton("Clear prompt cache…")
        self.clear_cache_button.clicked.connect(lambda: clearer.ask(self))
        self.cache_result = QLabel()
        self.cache_result.setObjectName("Hint")
        clearer.cleared.connect(
            lambda n: self.cache_result.setText(f"Cleared: {fmt_bytes(n)} freed")
        )
        clearer.failed.connect(self.cache_result.setText)
        cache_row = QHBoxLayout()
        cache_row.addWidget(self.cache_label)
        cache_row.addWidget(self.clear_cache_button)
        cache_row.addWidget(self.cache_result, 1)
        buttons = QHBoxLayout()
        buttons.addWidget(add)
        buttons.addWidget(refresh)
        buttons.addWidget(self.mtp_button)
        buttons.addStretch(1)
        buttons.addWidget(self.default_button)
        buttons.addWidget(self.load_button)
        buttons.addWidget(close)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 16, 16, 16)
        layout.setSpacing(10)
        layout.addWidget(self.loaded)
        layout.addWidget(_heading("Loaded"))
        layout.addWidget(self.loaded_panel, 1)
        layout.addWidget(_heading("Found on this computer"))
        layout.addWidget(self.table, 1)
        layout.addWidget(self.error)
        progress_row = QHBoxLayout()
        progress_row.addWidget(self.progress_label, 1)
        progress_row.addWidget(self.progress)
        layout.addLayout(progress_row)
        layout.addLayout(cache_row)
        layout.addLayout(buttons)

        bridge.loadStarted.connect(self._load_started)
        bridge.loadProgress.connect(self._load_progress)
        bridge.modelLoaded.connect(self._model_loaded)
        bridge.modelAdded.connect(lambda _info: self._load_ended())
        bridge.modelRemoved.connect(lambda _info, _why: bridge.poll_stats())
        bridge.loadFailed.connect(self._load_failed)
        bridge.actionFailed.connect(self.show_error)
        bridge.statsUpdated.connect(self._stats)
        self._show_loaded(bridge.model_info)
        self._stats(bridge.stats())
        self.refresh()

    # -- models --------------------------------------------------------------------------------

    def extra_dirs(self) -> list[str]:
        return list(self._store.setting(MODEL_DIRS_KEY, []))

    def refresh(self) -> None:
        separate_weights = self.mtp_weights()
        # a model pointed at separate MTP weights runs "mtp" too (the method picker reads this)
        self.entries = [
            dataclasses.replace(e, has_mtp=True) if separate_weights.get(e.path or "") else e
            for e in list_models(self.extra_dirs())
        ]
        self.table.setRowCount(len(self.entries))
        for row, entry in enumerate(self.entries):
            size = fmt_bytes(entry.size_bytes) if entry.size_bytes else "–"
            location = entry.location or entry.path or "converted on first use"
            separate = self.mtp_weights().get(entry.path or "")
            mtp = SEPARATE_MTP_TEXT if separate else MTP_TEXT if entry.has_mtp else "–"
            head = HEAD_TEXT if entry.draft_head else "–"
            texts = (entry.name, entry.source_label, size, mtp, head, location)
            for column, text in enumerate(texts):
                item = QTableWidgetItem(text)
                tip = entry.path or entry.name
                if column == 3 and separate:
                    tip = f"MTP weights from {separate}"
                elif column == 3 and entry.has_mtp:
                    tip = MTP_TIP
                elif column == 4 and entry.draft_head:
                    tip = HEAD_TIP
                item.setToolTip(tip)
                self.table.setItem(row, column, item)
        self._select_loaded()
        self.modelsChanged.emit(self.entries)

    def add_folder(self, path: str) -> str | None:
        """Add a model folder; returns (and shows) why it was refused, or None."""
        problem = validate_folder(path)
        if problem:
            self.show_error(f"Not added: {problem}.")
            return problem
        dirs = self.extra_dirs()
        if path not in dirs:
            dirs.append(path)
            self._store.set_setting(MODEL_DIRS_KEY, dirs)
        self.error.setVisible(False)
        self.refresh()
        return None

    def mtp_weights(self) -> dict[str, str]:
        """Separate MTP weights by model (what the engine is started with)."""
        return dict(self._store.setting(MTP_WEIGHTS_KEY, {}) or {})

    def set_mtp_weights(self, path: str) -> str | None:
        """Point the selected model at MTP weights; returns (and shows) why not, or None."""
        entry = self._selected_entry()
        if entry is None or not path:
            return None
        problem = check_mtp_weights(entry.location or entry.path or "", path)
        if problem:
            self.show_error(f"MTP weights not used: {problem}.")
            return problem
        choices = self.mtp_weights()
        choices[entry.path or ""] = path
        self._store.set_setting(MTP_WEIGHTS_KEY, choices)
        self.error.setVisible(False)
        self.progress_label.setText(
            f"{entry.name} drafts with these MTP weights from Tandem's next start"
        )
        self.refresh()
        return None

    def load_selected(self) -> None:
        """Load the selected model next to the others (nothing is cancelled)."""
        entry = self._selected_entry()
        if entry is not None:
            self.error.setVisible(False)
            self._bridge.request_load(entry.path)

    def make_selected_default(self) -> None:
        """Chats set to "Default model" use the selected model from their next reply."""
        entry = self._selected_entry()
        if entry is not None:
            self.error.setVisible(False)
            self._bridge.request_default(entry.path)

    def _selected_entry(self) -> ModelEntry | None:
        row = self.table.currentRow()
        return self.entries[row] if 0 <= row < len(self.entries) else None

    def select_path(self, path: str | None) -> bool:
        for row, entry in enumerate(self.entries):
            if entry.path == path:
                self.table.selectRow(row)
                return True
        return False

    def show_error(self, message: str) -> None:
        self.error.setText(message)
        self.error.setVisible(True)

    # -- internals -----------------------------------------------------------------------------

    def _browse(self) -> None:
        open_folder_dialog(self, "Add a model folder", self.add_folder)

    def _browse_mtp(self) -> None:
        dialog = QFileDialog(self, "Choose the MTP weights (safetensors)")
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.setNameFilter("Safetensors (*.safetensors)")
        dialog.fileSelected.connect(self.set_mtp_weights)
        dialog.open()

    def _select_loaded(self) -> None:
        info = self._bridge.model_info
        if info is None or not self.select_path(self._bridge.model_spec):
            self.table.selectRow(0)

    def _show_loaded(self, info: ModelInfo | None) -> None:
        if info is None:
            self.loaded.setText("<b>No default model loaded</b>")
            return
        context = f"{info.context_length:,} tokens" if info.context_length else "unknown"
        self.loaded.setText(
            f"<b>Default model:</b> {info.name} &nbsp;·&nbsp; {info.architecture} &nbsp;·&nbsp; "
            f"{fmt_count(info.parameters)} parameters &nbsp;·&nbsp; {info.dtype} &nbsp;·&nbsp; "
            f"{fmt_bytes(info.bytes)} in memory &nbsp;·&nbsp; context {context}"
        )

    def _load_started(self, spec: str) -> None:
        self.progress.setVisible(True)
        self.progress.setRange(0, 0)
        self.progress_label.setText(f"Loading {spec or 'the built-in model'}…")

    def _load_progress(self, message: str, fraction: float) -> None:
        if fraction >= 0:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(fraction * 1000))
        self.progress_label.setText(message)

    def _model_loaded(self, info: ModelInfo) -> None:
        self._load_ended()
        self._show_loaded(info)
        self._select_loaded()

    def _load_ended(self) -> None:
        if not (self._bridge.loads or self._bridge.loading):
            self.progress.setVisible(False)
            self.progress_label.setText("")
        self._bridge.poll_stats()

    def _load_failed(self, message: str) -> None:
        self._load_ended()
        self.show_error(f"Could not load the model: {message}")

    def _stats(self, stats: EngineStats) -> None:
        self.loaded_panel.update_models(stats, self._chats(), self._bridge.model_for)
        cache = stats.cache
        entries = f" in {cache.disk_entries} files" if cache.disk_entries else ""
        self.cache_label.setText(
            f"<b>Prompt cache on disk:</b> {fmt_bytes(cache.disk_bytes)}{entries}"
        )

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self._bridge.poll_stats()


def _heading(text: str) -> QLabel:
    label = QLabel(text)
    label.setObjectName("CardTitle")
    return label
