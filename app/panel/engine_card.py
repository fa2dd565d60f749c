"""The live panel's "Engine" card: the models it holds, throughput and batch for every chat
together, and speculation over the last minute or since the engine started (a toggle says
which)."""

from __future__ import annotations

from collections import deque

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from app.formatting import fmt_bytes, fmt_count, fmt_duration, fmt_percent, fmt_rate
from app.panel.ahead_figures import show_ahead
from app.panel.metric_tips import METRIC_TIPS
from app.panel.position_chart import PositionChart
from app.panel.sparkline import Sparkline
from app.widgets.metric_card import MetricCard
from app.widgets.segmented_toggle import SegmentedToggle
from engine.engine_reports import EngineStats
from server.server_stats import ServerStats

DEFAULT_ENGINE_HISTORY = 120  # samples of the engine's tokens/s (one per stats poll)
SCOPE_RECENT = "recent"
SCOPE_TOTAL = "total"
DEFAULT_SCOPE = SCOPE_RECENT
SCOPE_CHOICES = {SCOPE_RECENT: "Last minute", SCOPE_TOTAL: "Since start"}


class EngineCard(MetricCard):
    """Engine-wide figures; `scopeChanged` when the user flips last minute / since start."""

    scopeChanged = Signal(str)

    def __init__(self, parent=None) -> None:
        super().__init__("Engine", parent)
        self._rates: deque[float] = deque(maxlen=DEFAULT_ENGINE_HISTORY)
        self.stats = EngineStats()
        self.model = QLabel("No model")
        self.model.setObjectName("MetricValue")
        self.model.setWordWrap(True)
        self.add_widget(self.model)
        self.add_metric("rate", "Throughput", big=True)
        self.spark = Sparkline()
        self.add_widget(self.spark)
        self.add_metric("batch", "Batch size")
        self.add_metric("queue", "Running / waiting")
        self.add_metric("api", "API requests", tip=METRIC_TIPS["api"])
        self.set_value("api", "server off")
        self.add_metric("saved", "Forwards saved since start", tip=METRIC_TIPS["saved"], big=True)

        row = QWidget()
        line = QHBoxLayout(row)
        line.setContentsMargins(0, 8, 0, 0)
        self.scope = SegmentedToggle(SCOPE_CHOICES, current=DEFAULT_SCOPE)
        self.scope.setToolTip("Which span the speculation figures below cover")
        self.scope.changed.connect(self._scope_changed)
        line.addWidget(self.scope)
        line.addStretch(1)
        self.add_widget(row)
        self.scope_caption = self.add_caption("")
        self.scope_caption.setObjectName("Hint")
        self.scope_caption.setWordWrap(True)
        self.add_metric("acceptance", "Acceptance", tip=METRIC_TIPS["acceptance"])
        self.add_metric("mal", "Mean accept. length", tip=METRIC_TIPS["mal"])
        self.add_metric("tpf", "Tokens / forward", tip=METRIC_TIPS["tpf"])
        self.add_metric("drafted", "Drafted tokens")
        self.add_metric("ahead", "Rounds ahead", tip=METRIC_TIPS["ahead"])
        self.add_metric("guessed", "Guessed wrong", tip=METRIC_TIPS["guessed"])
        self.add_caption("Acceptance by draft position")
        self.positions = PositionChart()
        self.add_widget(self.positions)

    def set_scope(self, scope: str) -> None:
        self.scope.set_current(scope if scope in SCOPE_CHOICES else DEFAULT_SCOPE)

    def set_server_stats(self, stats: ServerStats | None) -> None:
        """The local server's requests (None: it is off); the engine figures include them."""
        if stats is None:
            self.set_value("api", "server off")
        else:
            self.set_value("api", f"{stats.running} running · {stats.served} served")

    def update_stats(self, stats: EngineStats) -> None:
        self.stats = stats
        self._rates.append(stats.tokens_per_s)
        ready = [m for m in stats.models if m.status == "ready"]
        if len(ready) > 1:  # several models: each with its memory, the budget last
            model = "\n".join(
                f"{m.name}  ·  {fmt_bytes(m.memory_bytes)}" + ("  ·  busy" if m.busy else "")
                for m in ready
            )
            model += f"\nMemory {fmt_bytes(stats.memory_used_bytes)} of "
            model += fmt_bytes(stats.memory_budget_bytes)
        elif stats.model is not None:
            model = f"{stats.model.name}  ·  {fmt_bytes(stats.model.bytes)}"
            if stats.draft_model is not None:
                model += f"\nDraft: {stats.draft_model.name}"
        else:
            model = {"loading": "Loading model…", "error": "No model (load failed)"}.get(
                stats.status, "No model"
            )
        self.model.setText(model)
        self.set_value("rate", fmt_rate(stats.tokens_per_s) if stats.running else "idle")
        self.set_value("batch", f"{stats.batch_size}")
        self.set_value("queue", f"{stats.running} / {stats.waiting}")
        self.set_value("saved", fmt_count(stats.spec.forwards_saved))
        self.spark.set_values(list(self._rates))
        self._show_spec()

    def _scope_changed(self, scope: str) -> None:
        self._show_spec()
        self.scopeChanged.emit(scope)

    def _show_spec(self) -> None:
        stats = self.stats
        recent = self.scope.current == SCOPE_RECENT
        spec = stats.spec_recent if recent else stats.spec
        if recent:
            span = stats.recent_window_s
            last = "minute" if round(span) == 60 else fmt_duration(span)
            caption = f"Speculation over the last {last}, all chats together."
        else:
            since = f" {fmt_duration(stats.uptime_s)} ago" if stats.uptime_s else ""
            caption = f"Speculation since the engine started{since}, all chats together."
        self.scope_caption.setText(caption)
        drafted = spec.draft_tokens > 0
        self.set_value("acceptance", fmt_percent(spec.acceptance_rate) if drafted else "–")
        self.set_value("mal", f"{spec.mean_acceptance_length:.2f}" if spec.rounds else "–")
        self.set_value("tpf", f"{spec.tokens_per_forward:.2f}" if spec.target_forwards else "–")
        self.set_value("drafted", fmt_count(spec.draft_tokens))
        show_ahead(self, spec)
        self.positions.set_rates(spec.acceptance_by_position)
