"""The live panel's "Prompt cache" card: hits, size in RAM and on disk, and "Clear prompt cache"."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget

from app.formatting import fmt_bytes, fmt_count, fmt_percent
from app.panel.metric_tips import METRIC_TIPS
from app.widgets.metric_card import MetricCard
from engine.engine_reports import CacheStats


class CacheCard(MetricCard):
    """Prompt-cache figures; `clearRequested` when the user asks to empty it."""

    clearRequested = Signal()

    def __init__(self, parent=None) -> None:
        super().__init__("Prompt cache", parent)
        self.add_metric("hits", "Hits")
        self.add_metric("misses", "Misses")
        self.add_metric("hit_rate", "Hit rate")
        self.add_metric("tokens", "Cached tokens")
        self.add_metric("ram", "RAM")
        self.add_metric("disk", "On disk", tip=METRIC_TIPS["disk"])
        row = QWidget()
        line = QHBoxLayout(row)
        line.setContentsMargins(0, 4, 0, 0)
        self.clear_button = QPushButton("Clear prompt cache…")
        self.clear_button.setToolTip("Delete the cached prompts in memory and on disk")
        self.clear_button.clicked.connect(self.clearRequested)
        self.result = QLabel()
        self.result.setObjectName("Hint")
        self.result.setWordWrap(True)
        line.addWidget(self.clear_button)
        line.addWidget(self.result, 1)
        self.add_widget(row)

    def update_stats(self, cache: CacheStats) -> None:
        lookups = cache.hits + cache.misses
        self.set_value("hits", f"{cache.hits}")
        self.set_value("misses", f"{cache.misses}")
        self.set_value("hit_rate", fmt_percent(cache.hits / lookups) if lookups else "–")
        self.set_value("tokens", fmt_count(cache.cached_tokens))
        self.set_value("ram", f"{fmt_bytes(cache.ram_bytes)} · {cache.ram_entries}")
        self.set_value("disk", f"{fmt_bytes(cache.disk_bytes)} · {cache.disk_entries}")

    def show_result(self, text: str) -> None:
        self.result.setText(text)
