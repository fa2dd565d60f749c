"""The Qt model of the models the engine holds: one row per loaded (or loading) model with its
memory, its state (loading, in use, idle, pinned) and the chats that use it."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt

from app.formatting import fmt_bytes, fmt_duration, fmt_rate
from engine.engine_reports import ModelStats

_Index = QModelIndex | QPersistentModelIndex
COLUMNS = ("Model", "Memory", "State", "Chats")


class LoadedRoles(enum.IntEnum):
    STATS = Qt.ItemDataRole.UserRole + 1  # the row's ModelStats


@dataclass(frozen=True)
class ChatUse:
    """One open chat as the Models window sees it."""

    title: str
    model: str | None  # its model setting (None: the engine's default model)
    request_id: str | None  # its running reply's request, if any


class LoadedModelsModel(QAbstractTableModel):
    """Rows of ModelStats; `set_models` replaces them (from each stats poll)."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._rows: list[ModelStats] = []
        self._chats: list[list[str]] = []

    def set_models(self, models: list[ModelStats], chats: list[ChatUse], owner: Any) -> None:
        """`owner(chat_model_setting)`: the ModelStats a chat's setting names, or None."""
        chats_of = [self._chats_of(m, chats, owner) for m in models]
        if [m.key for m in models] == [m.key for m in self._rows]:
            self._rows, self._chats = list(models), chats_of
            if models:
                self.dataChanged.emit(self.index(0, 0), self.index(len(models) - 1, 3))
            return
        self.beginResetModel()
        self._rows, self._chats = list(models), chats_of
        self.endResetModel()

    def stats(self, row: int) -> ModelStats | None:
        return self._rows[row] if 0 <= row < len(self._rows) else None

    def chats(self, row: int) -> list[str]:
        return self._chats[row] if 0 <= row < len(self._chats) else []

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = 0) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        model, column = self._rows[index.row()], index.column()
        if role == LoadedRoles.STATS:
            return model
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text(model, column, self._chats[index.row()])
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tip(model, column, self._chats[index.row()])
        return None

    # -- the cells -------------------------------------------------------------------------------

    @staticmethod
    def _text(model: ModelStats, column: int, chats: list[str]) -> str:
        if column == 0:
            info = model.info
            mtp = "  · MTP" if info is not None and info.mtp else ""
            head = "  · draft head" if info is not None and info.draft_head else ""
            return model.name + mtp + head + ("  (default)" if model.configured else "")
        if column == 1:
            return fmt_bytes(model.memory_bytes) if model.memory_bytes else "–"
        if column == 2:
            return state_text(model)
        return ", ".join(chats) if chats else "–"

    @staticmethod
    def _tip(model: ModelStats, column: int, chats: list[str]) -> str:
        if column == 1:
            return (
                f"Weights {fmt_bytes(model.weights_bytes)}, "
                f"KV caches {fmt_bytes(model.cache_bytes)}"
            )
        if column == 3:
            return "\n".join(chats) or "No open chat uses it"
        info = model.info
        where = info.path if info is not None else model.key
        if info is not None and info.mtp:
            where += '\nMTP layers: the speculative method "MTP" drafts with them'
        elif info is not None and info.mtp_note:
            where += f"\nMTP unavailable: {info.mtp_note}"
        if info is not None and info.draft_head:
            where += (
                f'\nDraft head: {info.draft_head}; "Draft model" and "Auto" draft with it when '
                "no draft model is chosen"
            )
        elif info is not None and info.draft_head_note:
            where += f"\nDraft head unavailable: {info.draft_head_note}"
        if info is not None:  # what this model cannot do, and why
            for note in (info.batching_note, info.speculation_note, info.prompt_cache_note):
                if note:
                    where += f"\n{note}"
        return f"{model.name}\n{where}"

    @staticmethod
    def _chats_of(model: ModelStats, chats: list[ChatUse], owner: Any) -> list[str]:
        names = []
        for chat in chats:
            replying = chat.request_id is not None and chat.request_id in model.request_ids
            drafting = chat.request_id is not None and chat.request_id in model.draft_request_ids
            owned = owner(chat.model)
            if replying:
                names.append(f"{chat.title} (replying)")
            elif drafting:
                names.append(f"{chat.title} (drafting)")
            elif owned is not None and owned.key == model.key:
                names.append(chat.title)
        return names


def state_text(model: ModelStats) -> str:
    """Loading 40%, In use · 12.5 tok/s, Idle 3 min; "pinned" when it is."""
    if model.status == "loading":
        done = f" {model.load_fraction:.0%}" if model.load_fraction >= 0 else ""
        return f"Loading{done}"
    if model.busy:
        rate = f" · {fmt_rate(model.tokens_per_s)}" if model.tokens_per_s else ""
        text = f"In use{rate}"
    else:
        text = f"Idle {fmt_duration(model.idle_s)}"
    return text + (" · pinned" if model.pinned else "")
