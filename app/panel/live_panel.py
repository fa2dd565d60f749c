"""The live panel (a dock): what speculation and the prompt cache are doing, for the current
chat and for the whole engine, updated while replies stream."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QScrollArea, QVBoxLayout, QWidget

from app.chat.chat_controller import ChatController
from app.panel.cache_card import CacheCard
from app.panel.chat_card import ChatCard
from app.panel.engine_card import EngineCard
from engine.engine_reports import EngineStats

PANEL_MIN_WIDTH = 200  # with the sidebar's and the chat's minimums, under 800 px


class LivePanel(QScrollArea):
    """Three cards: this chat, the engine, the prompt cache. Their signals are the panel's
    actions: `chat_card.methodChosen`, `engine_card.scopeChanged`, `cache_card.clearRequested`."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("PanelScroll")
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setMinimumWidth(PANEL_MIN_WIDTH)

        body = QWidget()
        body.setObjectName("DockBody")
        layout = QVBoxLayout(body)
        layout.setContentsMargins(12, 4, 12, 12)
        layout.setSpacing(10)
        self.highlight = QCheckBox("Highlight tokens from drafts")
        self.highlight.setToolTip("Tint the reply text that came from accepted draft tokens")
        layout.addWidget(self.highlight)
        self.chat_card = ChatCard()
        self.engine_card = EngineCard()
        self.cache_card = CacheCard()
        for card in (self.chat_card, self.engine_card, self.cache_card):
            layout.addWidget(card)
        layout.addStretch(1)
        self.setWidget(body)
        # the figures tests and screenshots look at most
        self.chat_spec = self.chat_card.spec
        self.chat_positions = self.chat_card.positions
        self.engine_spark = self.engine_card.spark

    @property
    def engine_stats(self) -> EngineStats:
        return self.engine_card.stats

    def set_chat(self, controller: ChatController | None) -> None:
        self.chat_card.set_chat(controller)

    def update_engine(self, stats: EngineStats) -> None:
        self.engine_card.update_stats(stats)
        self.cache_card.update_stats(stats.cache)
