"""Help → About Tandem: the app's version and what it runs on (MLX, mlx-lm, Qt, the device),
read from package metadata and the engine's stats, never hard-coded."""

from __future__ import annotations

import platform
from dataclasses import dataclass

import PySide6
from PySide6.QtCore import Qt, qVersion
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QFormLayout, QLabel, QVBoxLayout, QWidget

from app.theme import app_icon
from app.version import app_version, package_version
from engine.engine_reports import EngineStats


@dataclass(frozen=True)
class AboutInfo:
    """The facts the About box shows."""

    version: str
    mlx: str
    mlx_lm: str
    qt: str
    python: str
    device: str


def about_info(stats: EngineStats) -> AboutInfo:
    device = stats.device or "not reported yet (the engine is starting)"
    if stats.blas:
        device += f" · {stats.blas}"
    return AboutInfo(
        version=app_version(),
        mlx=package_version("mlx"),
        mlx_lm=package_version("mlx-lm"),
        qt=f"{qVersion()} (PySide6 {PySide6.__version__})",
        python=f"{platform.python_version()} on {platform.system()} {platform.machine()}",
        device=device,
    )


class AboutDialog(QDialog):
    """Tandem's version and its runtime."""

    def __init__(self, info: AboutInfo, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("About Tandem")
        self.info = info
        icon = QLabel()
        icon.setPixmap(app_icon().pixmap(56, 56))
        title = QLabel(f"<b style='font-size:15pt'>Tandem</b>&nbsp;&nbsp;{info.version}")
        blurb = QLabel(
            "Chat with local models on MLX: several chats batched together, with speculative "
            "decoding inside the batch."
        )
        blurb.setWordWrap(True)
        blurb.setObjectName("Hint")
        form = QFormLayout()
        form.setHorizontalSpacing(16)
        self.values: dict[str, QLabel] = {}
        for key, label, value in (
            ("mlx", "MLX", info.mlx),
            ("mlx_lm", "mlx-lm", info.mlx_lm),
            ("qt", "Qt", info.qt),
            ("python", "Python", info.python),
            ("device", "Device", info.device),
        ):
            shown = QLabel(value)
            shown.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            shown.setWordWrap(True)
            self.values[key] = shown
            name = QLabel(label)
            name.setObjectName("MetricLabel")
            form.addRow(name, shown)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(20, 20, 20, 16)
        layout.setSpacing(12)
        layout.addWidget(icon)
        layout.addWidget(title)
        layout.addWidget(blurb)
        layout.addLayout(form)
        layout.addWidget(buttons)
        self.setMinimumWidth(420)
