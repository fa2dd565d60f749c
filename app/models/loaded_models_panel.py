"""The Models window's "Loaded" part: the models the engine holds (memory, state, chats), the
memory budget, and Unload / Pin for the selected one."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.formatting import fmt_bytes
from app.models.loaded_models_model import ChatUse, LoadedModelsModel
from engine.engine_reports import EngineStats, ModelStats

IN_USE_TIP = "Chats are replying with it: unload it once their replies have ended"


class LoadedModelsPanel(QWidget):
    """A table of the loaded models with their buttons; asks through signals."""

    unloadRequested = Signal(str)  # the model's key
    pinRequested = Signal(str, bool)  # the model's key, pin (True) or unpin

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.model = LoadedModelsModel(self)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.setAlternatingRowColors(True)
        self.table.setShowGrid(False)
        header = self.table.horizontalHeader()
        for column in range(3):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.table.selectionModel().selectionChanged.connect(lambda *_: self._enable())
        self.unload_button = QPushButton("Unload")
        self.unload_button.clicked.connect(self._unload)
        self.pin_button = QPushButton("Pin")
        self.pin_button.clicked.connect(self._pin)
        buttons = QHBoxLayout()
        buttons.addWidget(self.summary, 1)
        buttons.addWidget(self.pin_button)
        buttons.addWidget(self.unload_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.table, 1)
        layout.addLayout(buttons)
        self._enable()

    def update_models(
        self,
        stats: EngineStats,
        chats: list[ChatUse],
        owner: Callable[[str | None], ModelStats | None],
    ) -> None:
        """Show the engine's models; the selection stays on the same model."""
        chosen = self.selected()
        self.model.set_models(stats.models, chats, owner)
        if chosen is not None:
            self.select(chosen.key)
        budget = stats.memory_budget_bytes
        self.summary.setText(
            f"<b>Memory:</b> {fmt_bytes(stats.memory_used_bytes)} of the "
            f"{fmt_bytes(budget)} budget &nbsp;·&nbsp; {len(stats.models)} model"
            + ("s" if len(stats.models) != 1 else "")
        )
        self.summary.setToolTip(
            "Idle models are unloaded to make room for another, least recently used first; "
            "pinned ones stay.\nMLX holds "
            f"{fmt_bytes(stats.active_memory_bytes)} in all (prompt cache included)."
        )
        self._enable()

    def selected(self) -> ModelStats | None:
        rows = self.table.selectionModel().selectedRows()
        return self.model.stats(rows[0].row()) if rows else None

    def select(self, key: str) -> bool:
        for row in range(self.model.rowCount()):
            if self.model.stats(row).key == key:
                self.table.selectRow(row)
                return True
        return False

    # -- internals -----------------------------------------------------------------------------

    def _enable(self) -> None:
        model = self.selected()
        ready = model is not None and model.status == "ready"
        self.pin_button.setEnabled(ready)
        self.pin_button.setText("Unpin" if model is not None and model.pinned else "Pin")
        self.pin_button.setToolTip(
            "Pinned models are never unloaded to make room for another"
            if ready
            else "Select a loaded model"
        )
        busy = ready and model.busy
        self.unload_button.setEnabled(ready and not busy)
        self.unload_button.setToolTip(
            IN_USE_TIP if busy else "Unload it and free its memory" if ready else ""
        )

    def _unload(self) -> None:
        model = self.selected()
        if model is not None:
            self.unloadRequested.emit(model.key)

    def _pin(self) -> None:
        model = self.selected()
        if model is not None:
            self.pinRequested.emit(model.key, not model.pinned)
