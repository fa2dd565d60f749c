"""Form fields as the settings use them: spin boxes that may be narrow and apply on commit, and
combo boxes selected by their data."""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox, QDoubleSpinBox, QSpinBox

FIELD_MIN_WIDTH = 64  # below their size hints, so that a dock may be narrow


def int_field(low: int, high: int) -> QSpinBox:
    spin = QSpinBox()
    spin.setRange(low, high)
    spin.setKeyboardTracking(False)
    spin.setMinimumWidth(FIELD_MIN_WIDTH)
    return spin


def float_field(low: float, high: float, step: float) -> QDoubleSpinBox:
    spin = QDoubleSpinBox()
    spin.setRange(low, high)
    spin.setSingleStep(step)
    spin.setDecimals(2)
    spin.setKeyboardTracking(False)
    spin.setMinimumWidth(FIELD_MIN_WIDTH)
    return spin


def select_data(combo: QComboBox, value: str | None) -> None:
    """Select the item whose data is `value` (a path: added when missing); None: the first."""
    index = combo.findData(value) if value else 0
    if index < 0 and value:
        combo.addItem(value.rstrip("/").rsplit("/", 1)[-1], value)
        index = combo.count() - 1
    combo.setCurrentIndex(max(index, 0))
