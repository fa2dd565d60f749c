"""The live panel's "This chat" card: the current chat's speculation settings, its last (or
running) reply's figures, and a notice when its speculation loses."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QLabel

from app.chat.chat_controller import ChatController
from app.formatting import fmt_percent, fmt_rate
from app.panel.ahead_figures import show_ahead
from app.panel.metric_tips import METRIC_TIPS
from app.panel.position_chart import PositionChart
from app.panel.sparkline import Sparkline
from app.panel.speculation_verdict import Verdict, judge
from app.settings.chat_settings import SPEC_METHOD_LABELS, ChatSettings, describe_drafters
from app.widgets.metric_card import MetricCard
from app.widgets.notice_banner import NoticeBanner
from engine.requests import RequestStats, SpecMethod

SWITCH_TEXT = {SpecMethod.AUTO.value: "Switch to Auto", SpecMethod.OFF.value: "Turn off"}


class ChatCard(MetricCard):
    """Figures of the current chat's reply; `methodChosen` when the user takes the notice's advice."""

    methodChosen = Signal(str)  # a SpecMethod value for the current chat

    def __init__(self, parent=None) -> None:
        super().__init__("This chat", parent)
        self._controller: ChatController | None = None
        self._stats: RequestStats | None = None
        self._stats_method: str | None = None  # the method the shown figures were made with
        self.name = QLabel("No chat")
        self.name.setObjectName("MetricValue")
        self.name.setWordWrap(True)
        self.add_widget(self.name)
        self.spec = self.add_caption("")
        self.spec.setWordWrap(True)
        self.notice = NoticeBanner("warning")
        self.notice.setVisible(False)
        self._switch = {
            value: self.notice.add_button(text, lambda v=value: self.methodChosen.emit(v))
            for value, text in SWITCH_TEXT.items()
        }
        self.add_widget(self.notice)
        self.add_metric("rate", "Decode speed", big=True)
        self.spark = Sparkline()
        self.add_widget(self.spark)
        self.add_metric("plain", "Plain decoding", tip=METRIC_TIPS["plain"])
        self.add_metric("tokens", "Generated")
        self.add_metric("acceptance", "Acceptance", tip=METRIC_TIPS["acceptance"])
        self.add_metric("recent", "Recent acceptance", tip=METRIC_TIPS["recent"])
        self.add_metric("mal", "Mean accept. length", tip=METRIC_TIPS["mal"])
        self.add_metric("tpf", "Tokens / forward", tip=METRIC_TIPS["tpf"])
        self.add_metric("ahead", "Rounds ahead", tip=METRIC_TIPS["ahead"])
        self.add_metric("guessed", "Guessed wrong", tip=METRIC_TIPS["guessed"])
        self.add_metric("ttft", "First token")
        self.add_metric("cached", "Cached prompt", tip=METRIC_TIPS["cached"])
        self.add_metric("drafters", "Drafted by", tip=METRIC_TIPS["drafters"], wide=True)
        self.add_caption("Acceptance by draft position")
        self.positions = PositionChart()
        self.add_widget(self.positions)
        self._show(None)

    # -- the chat ------------------------------------------------------------------------------

    def set_chat(self, controller: ChatController | None) -> None:
        if self._controller is not None:
            self._controller.replyStats.disconnect(self._reply_stats)
            self._controller.settingsChanged.disconnect(self._settings_changed)
            self._controller.titleChanged.disconnect(self.name.setText)
        self._controller = controller
        if controller is None:
            self.name.setText("No chat")
            self.spec.setText("")
            self._stats_method = None
            self._show(None)
            return
        controller.replyStats.connect(self._reply_stats)
        controller.settingsChanged.connect(self._settings_changed)
        controller.titleChanged.connect(self.name.setText)
        self.name.setText(controller.conversation.title)
        self._stats_method = controller.settings.spec_method
        self._settings_changed(controller.settings)
        self._show(controller.last_stats)

    def verdict(self) -> Verdict | None:
        """What the notice says now (None: hidden)."""
        if self._stats_method is None:
            return None
        return judge(self._stats, self._stats_method)

    def _reply_stats(self, stats: RequestStats) -> None:
        if self._controller is not None:
            self._stats_method = self._controller.settings.spec_method
        self._show(stats)

    def refresh_model(self) -> None:
        """The chat's model may have a new name (the default model loaded, or another added)."""
        if self._controller is not None:
            self._settings_changed(self._controller.settings)

    def _settings_changed(self, settings: ChatSettings) -> None:
        lines = [
            f"Model: {self._controller.model_name}" if self._controller else "",
            f"Speculation: {settings.describe_speculation()}",
            f"Max tokens {settings.max_tokens} · temperature {settings.temperature:g}",
        ]
        self.spec.setText("\n".join(line for line in lines if line))
        if settings.spec_method != self._stats_method:
            self._stats_method = None  # the figures shown were made with another method
        self._show_verdict()

    # -- figures -------------------------------------------------------------------------------

    def _show(self, stats: RequestStats | None) -> None:
        self._stats = stats
        if stats is None:
            keys = ("rate", "plain", "tokens", "ttft", "acceptance", "recent", "mal", "tpf")
            keys += ("ahead", "guessed")
            for key in (*keys, "drafters"):
                self.set_value(key, "–")
            self._show_cached(None)
            self.spark.set_values([])
            self.positions.set_rates([])
            self._show_verdict()
            return
        spec = stats.spec
        self.set_value("rate", fmt_rate(stats.decode_tokens_per_s))
        self.set_value("plain", fmt_rate(stats.plain_tokens_per_s or 0.0))
        self.set_value("tokens", f"{stats.generated_tokens}")
        self.set_value("ttft", f"{stats.ttft_s * 1000:.0f} ms" if stats.ttft_s else "–")
        self.set_value(
            "acceptance", fmt_percent(spec.acceptance_rate) if spec.draft_tokens else "–"
        )
        self.set_value("recent", fmt_percent(stats.recent_acceptance))
        self.set_value("mal", f"{spec.mean_acceptance_length:.2f}" if spec.rounds else "–")
        self.set_value("tpf", f"{spec.tokens_per_forward:.2f}" if spec.target_forwards else "–")
        show_ahead(self, spec)
        self.set_value("drafters", describe_drafters(spec.rounds_by_drafter))
        self._show_cached(stats)
        history = self._controller.rate_history if self._controller else []
        self.spark.set_values([rate for _t, rate in history])
        self.positions.set_rates(spec.acceptance_by_position)
        self._show_verdict()

    def _show_cached(self, stats: RequestStats | None) -> None:
        """Prompt tokens served from the cache; "off", the reason as its tooltip, where the
        chat's model does not use the prompt cache (so a miss is never silent)."""
        tip = METRIC_TIPS["cached"]
        if stats is None:
            text = "–"
        elif stats.prompt_cache_note:
            text, tip = "off", f"Off for this model: {stats.prompt_cache_note}"
        else:
            text = f"{stats.cached_tokens} / {stats.prompt_tokens}"
            if stats.cache_source:
                text += f" ({stats.cache_source.upper()})"
        self.set_value("cached", text)
        self.set_tip("cached", tip)

    def _show_verdict(self) -> None:
        verdict = self.verdict()
        self.notice.setVisible(verdict is not None)
        if verdict is None:
            return
        if verdict.kind == "losing":
            self.notice.set_kind("warning")
            self.notice.set_message(verdict.message, title="Speculation is not helping")
        else:
            self.notice.set_kind("info")
            self.notice.set_message(verdict.message)
        for value, button in self._switch.items():
            button.setVisible(value in verdict.suggestions)
            button.setToolTip(f"Use {SPEC_METHOD_LABELS[value]} for this chat from its next reply")
