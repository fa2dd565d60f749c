"""The status bar: the loaded model, progress while a model is prepared, short messages."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QProgressBar, QStatusBar

from app.engine_bridge import EngineBridge
from app.formatting import fmt_bytes, fmt_rate
from engine.requests import EngineStats, ModelInfo

MESSAGE_MS = 6000


class EngineStatusBar(QStatusBar):
    """The model's name and load progress on the right, short messages on the left."""

    def __init__(self, bridge: EngineBridge, parent=None) -> None:
        super().__init__(parent)
        self.setSizeGripEnabled(False)
        self.model_label = QLabel("Starting…")
        self.progress = QProgressBar()
        self.progress.setTextVisible(False)
        self.progress.setVisible(False)
        self.rate_label = QLabel()
        self.addPermanentWidget(self.progress)
        self.addPermanentWidget(self.rate_label)
        self.addPermanentWidget(self.model_label)
        bridge.loadStarted.connect(self._load_started)
        bridge.loadProgress.connect(self._load_progress)
        bridge.modelLoaded.connect(self._model_loaded)
        bridge.loadFailed.connect(self._load_failed)
        bridge.engineError.connect(lambda m: self.show_message(m, error=True))
        bridge.engineFailed.connect(self._engine_failed)
        bridge.statsUpdated.connect(self._stats)
        if bridge.model_info is not None:
            self._model_loaded(bridge.model_info)

    def show_message(self, text: str, *, error: bool = False) -> None:
        self.showMessage(("⚠  " if error else "") + text, MESSAGE_MS * (2 if error else 1))

    def _load_started(self, spec: str) -> None:
        self.progress.setVisible(True)
        self.progress.setRange(0, 0)
        name = spec.rstrip("/").rsplit("/", 1)[-1] if spec else "the built-in model"
        self.model_label.setText(f"Loading {name}…")

    def _load_progress(self, message: str, fraction: float) -> None:
        if fraction >= 0:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(fraction * 1000))
        self.showMessage(message)

    def _model_loaded(self, info: ModelInfo) -> None:
        self.progress.setVisible(False)
        self.clearMessage()
        self.model_label.setText(f"●  {info.name} · {fmt_bytes(info.bytes)}")
        self.model_label.setToolTip(f"{info.path}\n{info.architecture}, {info.dtype}")

    def _load_failed(self, message: str) -> None:
        self.progress.setVisible(False)
        self.model_label.setText("No model")
        self.show_message(f"Model failed to load: {message}", error=True)

    def _engine_failed(self, message: str) -> None:
        self.progress.setVisible(False)
        self.model_label.setText("Engine stopped")
        self.model_label.setToolTip(message)

    def _stats(self, stats: EngineStats) -> None:
        busy = stats.running or stats.waiting
        self.rate_label.setText(
            f"{fmt_rate(stats.tokens_per_s)} · batch {stats.batch_size}" if busy else ""
        )
