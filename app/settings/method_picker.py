"""Which speculative methods the chat's model can run: the picker greys out the others, the
reason as their tooltip (a model that cannot speculate refuses every speculative method with its
note; only models with MTP layers run "mtp")."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox

from app.models.model_catalog import ModelEntry
from app.settings.chat_settings import SPEC_METHOD_DESCRIPTIONS, spec_method_refusal
from engine.engine_reports import ModelInfo


def method_refusal(
    method: str, model: str | None, target: ModelInfo | None, entries: list[ModelEntry]
) -> str | None:
    """Why the chat's model (`model`; None: the engine's default, `target`) cannot run
    `method`, or None when it can (or when that is not known before it loads)."""
    if model is None:
        if target is None:
            return spec_method_refusal(method, has_mtp=None)
        return spec_method_refusal(
            method, speculation_note=target.speculation_note, has_mtp=target.mtp
        )
    entry = next((e for e in entries if e.path == model), None)
    return spec_method_refusal(method, has_mtp=entry.has_mtp if entry else None)


def grey_out(combo: QComboBox, refusal: Callable[[str], str | None]) -> None:
    """Disable the methods `refusal` names a reason for, the reason as their tooltip."""
    for index in range(combo.count()):
        method = combo.itemData(index)
        reason = refusal(method)
        combo.model().item(index).setEnabled(reason is None)
        tip = f"Not available: {reason}" if reason else SPEC_METHOD_DESCRIPTIONS[method]
        combo.setItemData(index, tip, Qt.ItemDataRole.ToolTipRole)
