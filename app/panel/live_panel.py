"""The live panel (a dock): what speculation and the prompt cache are doing, for the current
chat and for the whole engine, updated while replies stream."""

from __future__ import annotations

from collections import deque

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QLabel, QScrollArea, QVBoxLayout, QWidget

from app.chat.chat_controller import ChatController
from app.formatting import fmt_bytes, fmt_count, fmt_percent, fmt_rate
from app.panel.position_chart import PositionChart
from app.panel.sparkline import Sparkline
from app.settings.chat_settings import ChatSettings
from app.widgets.metric_card import MetricCard
from engine.requests import EngineStats, RequestStats, SpecStats

DEFAULT_ENGINE_HISTORY = 120  # samples of the engine's tokens/s (one per stats poll)
PANEL_MIN_WIDTH = 320


class LivePanel(QScrollArea):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("PanelScroll")
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setMinimumWidth(PANEL_MIN_WIDTH)
        self._controller: ChatController | None = None
        self._engine_rates: deque[float] = deque(maxlen=DEFAULT_ENGINE_HISTORY)
        self.engine_stats = EngineStats()

        body = QWidget()
        body.setObjectName("DockBody")
        layout = QVBoxLayout(body)
        layout.setContentsMargins(12, 4, 12, 12)
        layout.setSpacing(10)

        self.highlight = QCheckBox("Highlight tokens from drafts")
        self.highlight.setToolTip("Tint the reply text that came from accepted draft tokens")
        layout.addWidget(self.highlight)

        self.chat_card = MetricCard("This chat")
        self.chat_name = QLabel("No chat")
        self.chat_name.setObjectName("MetricValue")
        self.chat_name.setWordWrap(True)
        self.chat_card.add_widget(self.chat_name)
        self.chat_spec = self.chat_card.add_caption("")
        self.chat_spec.setWordWrap(True)
        self.chat_card.add_metric("rate", "Decode speed", big=True)
        self.chat_spark = Sparkline()
        self.chat_card.add_widget(self.chat_spark)
        self.chat_card.add_metric("tokens", "Generated")
        self.chat_card.add_metric("ttft", "First token")
        self.chat_card.add_metric("acceptance", "Acceptance", tip=_TIPS["acceptance"])
        self.chat_card.add_metric("mal", "Mean accept. length", tip=_TIPS["mal"])
        self.chat_card.add_metric("tpf", "Tokens / forward", tip=_TIPS["tpf"])
        self.chat_card.add_metric("cached", "Cached prompt", tip=_TIPS["cached"])
        self.chat_card.add_caption("Acceptance by draft position")
        self.chat_positions = PositionChart()
        self.chat_card.add_widget(self.chat_positions)
        layout.addWidget(self.chat_card)

        self.engine_card = MetricCard("Engine")
        self.engine_model = QLabel("No model")
        self.engine_model.setObjectName("MetricValue")
        self.engine_model.setWordWrap(True)
        self.engine_card.add_widget(self.engine_model)
        self.engine_card.add_metric("rate", "Throughput", big=True)
        self.engine_spark = Sparkline()
        self.engine_card.add_widget(self.engine_spark)
        self.engine_card.add_metric("batch", "Batch size")
        self.engine_card.add_metric("queue", "Running / waiting")
        self.engine_card.add_metric("acceptance", "Acceptance", tip=_TIPS["acceptance"])
        self.engine_card.add_metric("mal", "Mean accept. length", tip=_TIPS["mal"])
        self.engine_card.add_metric("tpf", "Tokens / forward", tip=_TIPS["tpf"])
        self.engine_card.add_metric("saved", "Forwards saved")
        self.engine_card.add_caption("Acceptance by draft position")
        self.engine_positions = PositionChart()
        self.engine_card.add_widget(self.engine_positions)
        layout.addWidget(self.engine_card)

        self.cache_card = MetricCard("Prompt cache")
        self.cache_card.add_metric("hits", "Hits")
        self.cache_card.add_metric("misses", "Misses")
        self.cache_card.add_metric("hit_rate", "Hit rate")
        self.cache_card.add_metric("tokens", "Cached tokens")
        self.cache_card.add_metric("ram", "RAM")
        self.cache_card.add_metric("disk", "Disk")
        layout.addWidget(self.cache_card)
        layout.addStretch(1)
        self.setWidget(body)
        self._show_request(None)

    # -- the current chat ----------------------------------------------------------------------

    def set_chat(self, controller: ChatController | None, title: str = "") -> None:
        if self._controller is not None:
            self._controller.replyStats.disconnect(self._request_stats)
            self._controller.settingsChanged.disconnect(self._settings_changed)
            self._controller.titleChanged.disconnect(self.chat_name.setText)
        self._controller = controller
        if controller is None:
            self.chat_name.setText("No chat")
            self.chat_spec.setText("")
            self._show_request(None)
            return
        controller.replyStats.connect(self._request_stats)
        controller.settingsChanged.connect(self._settings_changed)
        controller.titleChanged.connect(self.chat_name.setText)
        self.chat_name.setText(title or controller.conversation.title)
        self._settings_changed(controller.settings)
        self._request_stats(controller.last_stats)

    def _settings_changed(self, settings: ChatSettings) -> None:
        lines = [
            f"Speculation: {settings.describe_speculation()}",
            f"Max tokens {settings.max_tokens} · temperature {settings.temperature:g}",
        ]
        if settings.model:
            lines.append(f"Model: {_short(settings.model)}")
        self.chat_spec.setText("\n".join(lines))

    def _request_stats(self, stats: RequestStats | None) -> None:
        self._show_request(stats)

    def _show_request(self, stats: RequestStats | None) -> None:
        card = self.chat_card
        if stats is None:
            for key in ("rate", "tokens", "ttft", "acceptance", "mal", "tpf", "cached"):
                card.set_value(key, "–")
            self.chat_spark.set_values([])
            self.chat_positions.set_counts([], [])
            return
        card.set_value("rate", fmt_rate(stats.decode_tokens_per_s))
        card.set_value("tokens", f"{stats.generated_tokens}")
        card.set_value("ttft", f"{stats.ttft_s * 1000:.0f} ms" if stats.ttft_s else "–")
        self._show_spec(card, stats.spec)
        cached = f"{stats.cached_tokens} / {stats.prompt_tokens}"
        if stats.cache_source:
            cached += f" ({stats.cache_source.upper()})"
        card.set_value("cached", cached)
        history = self._controller.rate_history if self._controller else []
        self.chat_spark.set_values([rate for _t, rate in history])
        self.chat_positions.set_counts(
            stats.spec.accepted_by_position, stats.spec.drafted_by_position
        )

    # -- the engine ----------------------------------------------------------------------------

    def update_engine(self, stats: EngineStats) -> None:
        self.engine_stats = stats
        self._engine_rates.append(stats.tokens_per_s)
        card = self.engine_card
        if stats.model is not None:
            model = f"{stats.model.name}  ·  {fmt_bytes(stats.model.bytes)}"
            if stats.draft_model is not None:
                model += f"\nDraft: {stats.draft_model.name}"
        else:
            model = {"loading": "Loading model…", "error": "No model (load failed)"}.get(
                stats.status, "No model"
            )
        self.engine_model.setText(model)
        card.set_value("rate", fmt_rate(stats.tokens_per_s) if stats.running else "idle")
        card.set_value("batch", f"{stats.batch_size}")
        card.set_value("queue", f"{stats.running} / {stats.waiting}")
        self._show_spec(card, stats.spec)
        card.set_value("saved", fmt_count(stats.spec.forwards_saved))
        self.engine_spark.set_values(list(self._engine_rates))
        self.engine_positions.set_counts(
            stats.spec.accepted_by_position, stats.spec.drafted_by_position
        )
        cache = stats.cache
        lookups = cache.hits + cache.misses
        self.cache_card.set_value("hits", f"{cache.hits}")
        self.cache_card.set_value("misses", f"{cache.misses}")
        self.cache_card.set_value("hit_rate", fmt_percent(cache.hits / lookups) if lookups else "–")
        self.cache_card.set_value("tokens", fmt_count(cache.cached_tokens))
        self.cache_card.set_value("ram", f"{fmt_bytes(cache.ram_bytes)} · {cache.ram_entries}")
        self.cache_card.set_value("disk", f"{fmt_bytes(cache.disk_bytes)} · {cache.disk_entries}")

    @staticmethod
    def _show_spec(card: MetricCard, spec: SpecStats) -> None:
        drafted = spec.draft_tokens > 0
        card.set_value("acceptance", fmt_percent(spec.acceptance_rate) if drafted else "–")
        card.set_value("mal", f"{spec.mean_acceptance_length:.2f}" if spec.rounds else "–")
        card.set_value("tpf", f"{spec.tokens_per_forward:.2f}" if spec.target_forwards else "–")


def _short(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


_TIPS = {
    "acceptance": "Accepted draft tokens / drafted tokens",
    "mal": "1 + accepted tokens per verify round (vLLM's definition)",
    "tpf": "Tokens produced per forward pass of the target model",
    "cached": "Prompt tokens of the last reply served from the prompt cache",
}
