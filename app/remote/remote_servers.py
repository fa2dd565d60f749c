"""The remote servers for the GUI: adding one checks it answers (and keeps its key in the
keyring), each server's models are listed from /v1/models, and the chat settings' model list
gets them as "remote:" specs."""

from __future__ import annotations

import asyncio
import logging

from PySide6.QtCore import QObject, Signal

from app.models.model_catalog import ModelEntry
from app.remote.remote_backend import RemoteBackend, RemoteError
from app.remote.remote_spec import remote_spec
from app.remote.server_registry import RemoteServer, ServerRegistry

log = logging.getLogger(__name__)

REMOTE_SOURCE = "remote"


class RemoteServers(QObject):
    """Remote servers and their models; `modelsChanged` when either changes."""

    modelsChanged = Signal()

    def __init__(self, backend: RemoteBackend, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.backend = backend
        self.registry: ServerRegistry = backend.registry
        self.models: dict[str, list[str]] = {}  # server id -> model ids
        self.problems: dict[str, str] = {}  # server id -> why its models are not listed
        self._tasks: set[asyncio.Task] = set()

    def servers(self) -> list[RemoteServer]:
        return self.registry.servers()

    async def add(self, url: str, *, name: str = "", api_key: str = "") -> RemoteServer:
        """Add a server once it lists its models; ValueError (bad URL) or RemoteError (it
        cannot be reached, refuses the key, ...) otherwise, and nothing is kept."""
        server = self.registry.add(url, name=name, api_key=api_key)
        try:
            models = await self.backend.list_models(server)
        except RemoteError:
            self.registry.remove(server.id)
            raise
        self.models[server.id] = models
        self.problems.pop(server.id, None)
        self.modelsChanged.emit()
        return server

    async def change_key(self, server_id: str, api_key: str) -> list[str]:
        """Give a kept server a new key ("" for none) once it lists its models with it; its
        models. RemoteError (the server refuses it, cannot be reached) keeps the old key."""
        server = self.registry.get(server_id)
        if server is None:
            raise ValueError("that server is no longer in the list")
        old = self.registry.key(server)
        self.registry.set_key(server, api_key)
        try:
            models = await self.backend.list_models(server)
        except RemoteError:
            self.registry.set_key(server, old)
            raise
        self.models[server.id] = models
        self.problems.pop(server.id, None)
        self.modelsChanged.emit()
        return models

    def remove(self, server_id: str) -> None:
        self.registry.remove(server_id)
        self.models.pop(server_id, None)
        self.problems.pop(server_id, None)
        self.modelsChanged.emit()

    def refresh(self) -> None:
        """List every server's models again (in the background)."""
        task = asyncio.ensure_future(self._refresh())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _refresh(self) -> None:
        for server in self.servers():
            try:
                self.models[server.id] = await self.backend.list_models(server)
                self.problems.pop(server.id, None)
            except RemoteError as exc:
                log.info("remote server %s: %s", server.name, exc)
                self.problems[server.id] = str(exc)
        self.modelsChanged.emit()

    def entries(self) -> list[ModelEntry]:
        """Every listed remote model, for the chat settings' model list."""
        return [
            ModelEntry(
                f"{model} · {server.name}",
                remote_spec(server.id, model),
                source=REMOTE_SOURCE,
                location=server.url,
            )
            for server in self.servers()
            for model in self.models.get(server.id, [])
        ]

    def name_for(self, server_id: str, model: str) -> str:
        server = self.registry.get(server_id)
        return f"{model} on {server.name}" if server is not None else f"{model} (removed server)"

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self.backend.close()
