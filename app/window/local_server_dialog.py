"""Models ▸ Local server…: turn the OpenAI-compatible server on or off, choose where it listens
(this computer only, or every network interface) and on which port, and the API key its
clients must send (kept in the system keyring). A running server restarts with new settings."""

from __future__ import annotations

import socket

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.window.local_server_controller import EVERY_INTERFACE, LocalServerController
from server.cli import API_KEY_ENV
from server.local_server import DEFAULT_HOST

MAX_PORT = 65535
HOSTS = (
    (DEFAULT_HOST, "This computer only (127.0.0.1)"),
    (EVERY_INTERFACE, "Other devices on the network too (0.0.0.0)"),
)
OPEN_WITHOUT_KEY = "⚠ Anyone on your network can use your models: set an API key."


class LocalServerDialog(QDialog):
    """The local server's switch, address and key, and what it is doing now."""

    def __init__(self, server: LocalServerController, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Local server")
        self.setMinimumWidth(520)
        self._server = server
        self._failure = ""  # why the last start failed (shown until the next apply)

        intro = QLabel(
            "Serve the loaded models to editors and scripts through an OpenAI-compatible API. "
            "Their requests join the chats' batch."
        )
        intro.setWordWrap(True)
        intro.setObjectName("Hint")
        self.enabled = QCheckBox("Serve the models")
        self.host = QComboBox()
        for host, label in HOSTS:
            self.host.addItem(label, host)
        self.port = QSpinBox()
        self.port.setRange(0, MAX_PORT)
        self.port.setSpecialValueText("any free port")  # 0
        self.key = QLineEdit()
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText("none: any client may connect")
        self.warning = QLabel(OPEN_WITHOUT_KEY)
        self.warning.setObjectName("Warning")
        self.warning.setWordWrap(True)
        self.state = QLabel()
        self.state.setWordWrap(True)
        self.state.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        form = QFormLayout()
        form.addRow("Listen on", self.host)
        form.addRow("Port", self.port)
        form.addRow("API key", self.key)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Apply | QDialogButtonBox.StandardButton.Close
        )
        self.apply_button = buttons.button(QDialogButtonBox.StandardButton.Apply)
        self.apply_button.clicked.connect(self.apply)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.enabled)
        layout.addLayout(form)
        layout.addWidget(self.warning)
        layout.addWidget(self.state)
        layout.addWidget(buttons)

        self.host.currentIndexChanged.connect(self._update_warning)
        self.key.textChanged.connect(self._update_warning)
        server.stateChanged.connect(self._show_state)
        server.failed.connect(self._show_failure)
        self.refresh()

    def refresh(self) -> None:
        """Show the settings kept and the server's state."""
        host, port = self._server.address()
        index = self.host.findData(host)
        if index < 0:  # a host set elsewhere (a file, a test): shown as it is
            self.host.addItem(host, host)
            index = self.host.count() - 1
        self.host.setCurrentIndex(index)
        self.port.setValue(port)
        self.key.setText(self._server.api_key() or "")
        problem = self._server.keyring_problem
        self.key.setEnabled(problem is None)  # a key could not be kept
        if problem is not None:
            self.key.setPlaceholderText(f"no system keyring here: ${API_KEY_ENV} sets the key")
            self.key.setToolTip(problem)
        self.enabled.setChecked(self._server.running)
        self._show_state(self._server.running, self._server.url)
        self._update_warning()

    def apply(self) -> None:
        """Keep the address and key, then turn the server on or off as the box says."""
        server, self._failure = self._server, ""
        moved = (self.host.currentData(), self.port.value()) != server.address()
        server.set_address(self.host.currentData(), self.port.value(), restart=False)
        key = self.key.text().strip()
        rekeyed = key != (server.api_key() or "")
        if rekeyed and not server.set_api_key(key, restart=False):
            if moved:
                server.restart()  # the address still applies
            return  # no keyring: `failed` said so
        switch = self.enabled.isChecked() != server.running
        if switch:
            server.set_enabled(self.enabled.isChecked())
        elif moved or rekeyed:
            server.restart()  # once, with the address and the key together
        if switch or (server.running and (moved or rekeyed)):
            self.state.setText("Applying…")  # stateChanged or failed tells what came of it
        else:
            self._show_state(server.running, server.url)

    def _update_warning(self) -> None:
        open_to_all = self.host.currentData() == EVERY_INTERFACE
        self.warning.setVisible(open_to_all and not self.key.text().strip())

    def _show_state(self, running: bool, url: str) -> None:
        self.enabled.setChecked(running)
        if running:
            self.state.setText(_where(url))
        else:
            self.state.setText(f"⚠ {self._failure}" if self._failure else "Off")

    def _show_failure(self, message: str) -> None:
        self._failure = message
        self.enabled.setChecked(False)
        self.state.setText(f"⚠ {message}")


def _where(url: str) -> str:
    """What clients connect to: on every interface, this machine's address and the others'."""
    if f"//{EVERY_INTERFACE}:" not in url:
        return f"Running at {url}"
    here = url.replace(EVERY_INTERFACE, DEFAULT_HOST)
    others = url.replace(EVERY_INTERFACE, f"{socket.gethostname()}.local")
    return f"Running on every interface: {here} here, {others} from other devices"
