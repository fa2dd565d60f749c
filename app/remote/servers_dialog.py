"""Models ▸ Remote servers…: add a server by URL (and API key, kept in the system keyring),
see each server's models or why they cannot be listed, give a server a new key, remove one."""

from __future__ import annotations

import asyncio

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.remote.remote_backend import RemoteError
from app.remote.remote_servers import RemoteServers

URL_HINT = "http://192.168.1.20:8000/v1"


class RemoteServersDialog(QDialog):
    """The list of remote servers, and a form to add one."""

    def __init__(self, servers: RemoteServers, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Remote servers")
        self.resize(560, 420)
        self._servers = servers
        self._task: asyncio.Task | None = None

        intro = QLabel(
            "Chat with models served elsewhere (vLLM, llama.cpp's server, mlx_lm.server, "
            "another Tandem): any OpenAI-compatible server. Their models appear in each chat's "
            "model list. Keys are kept in the system keyring."
        )
        intro.setWordWrap(True)
        intro.setObjectName("Hint")
        self.list = QListWidget()
        self.remove_button = QPushButton("Remove")
        self.remove_button.clicked.connect(self._remove)
        self.key_button = QPushButton("Change its key")
        self.key_button.setToolTip(
            "Give the selected server the API key typed below (tried before it is kept)"
        )
        self.key_button.clicked.connect(self._change_key)
        self.url = QLineEdit()
        self.url.setPlaceholderText(URL_HINT)
        self.name = QLineEdit()
        self.name.setPlaceholderText("optional: what to call it")
        self.key = QLineEdit()
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText("optional")
        self.add_button = QPushButton("Add server")
        self.add_button.setDefault(True)
        self.add_button.clicked.connect(self._add)
        self.message = QLabel("")
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        form = QFormLayout()
        form.addRow("URL", self.url)
        form.addRow("Name", self.name)
        form.addRow("API key", self.key)
        row = QHBoxLayout()
        row.addWidget(self.add_button)
        row.addStretch(1)
        row.addWidget(self.key_button)
        row.addWidget(self.remove_button)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.list, 1)
        layout.addLayout(form)
        layout.addLayout(row)
        layout.addWidget(self.message)
        layout.addWidget(buttons)
        servers.modelsChanged.connect(self.refresh)
        self.refresh()

    def refresh(self) -> None:
        self.list.clear()
        for server in self._servers.servers():
            models = self._servers.models.get(server.id)
            problem = self._servers.problems.get(server.id)
            if problem:
                detail = f"⚠ {problem}"
            elif models is None:
                detail = "listing models…"
            else:
                detail = (
                    f"{len(models)} model{'s' if len(models) != 1 else ''}: "
                    + ", ".join(models[:4])
                    + ("…" if len(models) > 4 else "")
                )
            item = QListWidgetItem(f"{server.name} — {server.url}\n    {detail}")
            item.setData(Qt.ItemDataRole.UserRole, server.id)
            self.list.addItem(item)
        self.remove_button.setEnabled(self.list.count() > 0)
        self.key_button.setEnabled(self.list.count() > 0)

    def add_server(self, url: str, *, name: str = "", api_key: str = "") -> asyncio.Task:
        """Add as the form would (for tests too); the outcome shows in `message`."""
        self.url.setText(url)
        self.name.setText(name)
        self.key.setText(api_key)
        self._add()
        return self._task

    def _add(self) -> None:
        if self._task is not None and not self._task.done():
            return
        self.add_button.setEnabled(False)
        self.message.setText("Connecting…")
        self._task = asyncio.ensure_future(
            self._adding(self.url.text(), self.name.text(), self.key.text())
        )

    async def _adding(self, url: str, name: str, key: str) -> None:
        try:
            server = await self._servers.add(url, name=name, api_key=key)
        except (ValueError, RemoteError) as exc:
            self.message.setText(f"⚠ {exc}")
        except Exception as exc:  # noqa: BLE001 - e.g. no keyring on this system: say so
            self.message.setText(f"⚠ Could not add the server: {exc}")
        else:
            n = len(self._servers.models.get(server.id, []))
            self.message.setText(f"Added {server.name}: {n} model{'s' if n != 1 else ''}.")
            self.url.clear()
            self.name.clear()
            self.key.clear()
        finally:
            self.add_button.setEnabled(True)

    def change_key(self, server_id: str, api_key: str) -> asyncio.Task | None:
        """Give a server a new key as the button would (for tests too); the outcome shows in
        `message`."""
        if self._task is not None and not self._task.done():
            return None
        self.key_button.setEnabled(False)
        self.message.setText("Trying the new key…")
        self._task = asyncio.ensure_future(self._changing_key(server_id, api_key))
        return self._task

    def _change_key(self) -> None:
        item = self.list.currentItem() or self.list.item(0)
        if item is not None:
            self.change_key(item.data(Qt.ItemDataRole.UserRole), self.key.text())

    async def _changing_key(self, server_id: str, key: str) -> None:
        server = self._servers.registry.get(server_id)
        name = server.name if server is not None else "the server"
        try:
            models = await self._servers.change_key(server_id, key.strip())
        except (ValueError, RemoteError) as exc:
            self.message.setText(f"⚠ {exc} (its key is unchanged)")
        except Exception as exc:  # noqa: BLE001 - e.g. no keyring on this system: say so
            self.message.setText(f"⚠ Could not change the key: {exc}")
        else:
            said = "a new key" if key.strip() else "no key"
            n = len(models)
            self.message.setText(f"{name} now uses {said}: {n} model{'s' if n != 1 else ''}.")
            self.key.clear()
        finally:
            self.key_button.setEnabled(self.list.count() > 0)

    def _remove(self) -> None:
        item = self.list.currentItem() or self.list.item(0)
        if item is not None:
            self._servers.remove(item.data(Qt.ItemDataRole.UserRole))
            self.message.setText("")
