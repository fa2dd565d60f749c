"""The status bar: the default model (and how many models are loaded), progress while a model
is loaded, short messages (a model unloaded to make room, a refused unload)."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QProgressBar, QStatusBar

from app.engine_bridge import EngineBridge
from app.formatting import fmt_bytes, fmt_rate
from engine.engine_reports import EngineStats, ModelInfo

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
        self.server_label = QLabel()
        self.server_label.setVisible(False)
        self._default: ModelInfo | None = None  # the default model, once loaded
        self.addPermanentWidget(self.progress)
        self.addPermanentWidget(self.rate_label)
        self.addPermanentWidget(self.server_label)
        self.addPermanentWidget(self.model_label)
        bridge.loadStarted.connect(self._load_started)
        bridge.loadProgress.connect(self._load_progress)
        bridge.modelLoaded.connect(self._model_loaded)
        bridge.loadFailed.connect(self._load_failed)
        bridge.modelAdded.connect(self._model_added)
        bridge.modelRemoved.connect(
            lambda info, why: self.show_message(f"Unloaded {info.name}: {why}")
        )
        bridge.actionFailed.connect(lambda m: self.show_message(m, error=True))
        bridge.engineError.connect(lambda m: self.show_message(m, error=True))
        bridge.engineFailed.connect(self._engine_failed)
        bridge.statsUpdated.connect(self._stats)
        if bridge.model_info is not None:
            self._model_loaded(bridge.model_info)

    def set_server(self, running: bool, url: str) -> None:
        """The local server's port while it runs."""
        port = url.rsplit(":", 1)[-1].split("/", 1)[0] if url else ""
        self.server_label.setText(f"API :{port}" if running else "")
        self.server_label.setToolTip(f"Local server (OpenAI API) at {url}" if running else "")
        self.server_label.setVisible(running)

    def show_message(self, text: str, *, error: bool = False) -> None:
        self.showMessage(("⚠  " if error else "") + text, MESSAGE_MS * (2 if error else 1))

    def _load_started(self, spec: str) -> None:
        self.progress.setVisible(True)
        self.progress.setRange(0, 0)
        name = spec.rstrip("/").rsplit("/", 1)[-1] if spec else "the built-in model"
        if self._default is None:
            self.model_label.setText(f"Loading {name}…")
        else:  # another model next to the default one
            self.showMessage(f"Loading {name}…")

    def _load_progress(self, message: str, fraction: float) -> None:
        """Any model's load (a chat's first reply on it too)."""
        self.progress.setVisible(fraction < 1)
        if fraction >= 0:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(fraction * 1000))
        self.showMessage(message)

    def _model_loaded(self, info: ModelInfo) -> None:
        self.progress.setVisible(False)
        self.clearMessage()
        self._default = info
        self._show_default(info)

    def _show_default(self, info: ModelInfo) -> None:
        self.model_label.setText(f"●  {info.name} · {fmt_bytes(info.bytes)}")
        self.model_label.setToolTip(f"{info.path}\n{info.architecture}, {info.dtype}")

    def _model_added(self, info: ModelInfo) -> None:
        self.progress.setVisible(False)
        self.show_message(f"Loaded {info.name} ({fmt_bytes(info.bytes)})")

    def _load_failed(self, message: str) -> None:
        self.progress.setVisible(False)
        if self._default is None:
            self.model_label.setText("No model")
        self.show_message(f"Model failed to load: {message}", error=True)

    def _engine_failed(self, message: str) -> None:
        self._default = None  # until the engine has started again
        self.progress.setVisible(False)
        self.model_label.setText("Engine stopped")
        self.model_label.setToolTip(message)

    def _stats(self, stats: EngineStats) -> None:
        busy = stats.running or stats.waiting
        self.rate_label.setText(
            f"{fmt_rate(stats.tokens_per_s)} · batch {stats.batch_size}" if busy else ""
        )
        ready = [m for m in stats.models if m.status == "ready"]
        if self._default is not None and len(ready) > 1:
            self.model_label.setText(
                f"●  {self._default.name} + {len(ready) - 1} more · "
                f"{fmt_bytes(stats.memory_used_bytes)}"
            )
            self.model_label.setToolTip(
                "\n".join(f"{m.name}: {fmt_bytes(m.memory_bytes)}" for m in ready)
                + f"\nBudget: {fmt_bytes(stats.memory_budget_bytes)}"
            )
        elif self._default is not None:
            self._show_default(self._default)
