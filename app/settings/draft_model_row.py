"""The settings form's draft-model row: the local models to draft with, a button to choose a
folder, and the refusal of a draft that cannot draft for the chat's model (another vocabulary,
a folder that is not a model)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QToolButton, QWidget

from app.models.model_catalog import ModelEntry, check_draft, model_folder
from app.widgets.folder_dialog import open_folder_dialog
from app.widgets.form_fields import select_data
from engine.engine_reports import ModelInfo

NO_DRAFT_TEXT = "None"
OWN_HEAD_TEXT = "Own head"  # none chosen: the chat's model drafts with its trained head


def draft_refusal(
    path: str | None, model: str | None, target: ModelInfo | None, entries: list[ModelEntry]
) -> str | None:
    """Why `path` cannot draft for the chat's model (`model`; None: the engine's default,
    `target`), or None when it can (or when the files cannot tell)."""
    if model is None:
        return check_draft(
            target.path if target else None,
            path,
            target_vocab=target.vocab_size if target else None,
        )
    return check_draft(model_folder(model, entries), path)


class DraftModelRow(QWidget):
    """The draft-model picker; it refuses, with a message, a draft the chat's model cannot use."""

    chosen = Signal(object)  # the accepted draft model's path, or None
    refused = Signal(str)  # why the chosen draft model was refused

    def __init__(self, refusal: Callable[[str | None], str | None], parent=None) -> None:
        super().__init__(parent)
        self._refusal = refusal
        self._path: str | None = None  # the accepted draft: what the chat's settings hold
        self._quiet = False
        self.combo = QComboBox()
        self.browse = QToolButton()
        self.browse.setText("…")
        self.browse.setToolTip("Choose a draft model folder")
        self.browse.clicked.connect(self._browse)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(0)  # the button is borderless: its own padding spaces it
        row.addWidget(self.combo, 1)
        row.addWidget(self.browse)
        # the form places it under its fields, where a long message has the card's width
        self.error = QLabel()
        self.error.setObjectName("ErrorLabel")
        self.error.setWordWrap(True)
        self.error.setVisible(False)
        self.combo.currentIndexChanged.connect(self._picked)

    def set_models(self, entries: list[ModelEntry]) -> None:
        """Offer the local models in `entries`, keeping the accepted draft selected."""
        self._quiet = True
        try:
            self.combo.clear()
            self.combo.addItem(NO_DRAFT_TEXT, None)
            for entry in entries:
                if (entry.location or entry.path) and entry.source != "remote":
                    self.combo.addItem(entry.name, entry.location or entry.path)
            select_data(self.combo, self._path)
        finally:
            self._quiet = False

    def select(self, path: str | None) -> None:
        """Show `path` as the accepted draft, unchecked (the chat's settings hold it)."""
        self._quiet = True
        try:
            self._path = path
            select_data(self.combo, path)
        finally:
            self._quiet = False

    def choose(self, path: str | None) -> bool:
        """Pick a draft model as the user would; False (and refused) when refused."""
        select_data(self.combo, path)
        return self._path == (path or None)

    def set_own_head(self, head: str | None) -> None:
        """Name the chat's model's trained draft head (None: it has none) as the no-draft item."""
        self.combo.setItemText(0, OWN_HEAD_TEXT if head else NO_DRAFT_TEXT)
        tip = f"No draft model: this model's own {head} drafts" if head else NO_DRAFT_TEXT
        self.combo.setItemData(0, tip, Qt.ItemDataRole.ToolTipRole)

    def show_error(self, message: str) -> None:
        self.error.setText(message)
        self.error.setVisible(True)

    def hide_error(self) -> None:
        self.error.setVisible(False)

    def _picked(self, *_args) -> None:
        if self._quiet:
            return
        path = self.combo.currentData()
        reason = self._refusal(path)
        if reason:
            message = f"Draft model refused: {reason}."
            self.show_error(message)
            self.select(self._path)
            self.refused.emit(message)
            return
        self.hide_error()
        self._path = path
        self.chosen.emit(path)

    def _browse(self) -> None:
        open_folder_dialog(self, "Choose a draft model folder", self._add_path)

    def _add_path(self, path: str) -> None:
        if path and self.combo.findData(path) < 0:
            self.combo.addItem(path.rstrip("/").rsplit("/", 1)[-1], path)
        self.choose(path)
