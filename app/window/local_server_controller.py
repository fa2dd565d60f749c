"""The "Local server" toggle: `tandem serve`'s OpenAI-compatible server run inside the app's
qasync loop on the app's own engine, so API requests join the chats' batch."""

from __future__ import annotations

import asyncio
import logging
import os

import keyring
from keyring.errors import KeyringError
from PySide6.QtCore import QObject, Signal

from app.engine_bridge import EngineBridge
from app.store.conversation_store import Store
from server.cli import API_KEY_ENV
from server.local_server import DEFAULT_HOST, DEFAULT_PORT, LocalServer
from server.server_stats import ServerStats

ENABLED_KEY = "local_server"
PORT_KEY = "local_server_port"
HOST_KEY = "local_server_host"
EVERY_INTERFACE = "0.0.0.0"  # other machines on the network may connect
KEYRING_SERVICE = "Tandem local server"  # the API key lives in the system keyring
KEYRING_USER = "api-key"


class LocalServerController(QObject):
    """Starts and stops the local server; its state and counters as signals."""

    stateChanged = Signal(bool, str)  # running, its URL ("" when off)
    failed = Signal(str)  # a message for the user (the port is taken, say)
    statsChanged = Signal(object)  # ServerStats, or None while off

    def __init__(self, bridge: EngineBridge, store: Store, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._bridge = bridge
        self._store = store
        self._server: LocalServer | None = None
        self._task: asyncio.Task | None = None
        self.keyring_problem: str | None = None  # why the system keyring cannot be used
        bridge.statsUpdated.connect(self._stats_polled)

    @property
    def running(self) -> bool:
        return self._server is not None and self._server.running

    @property
    def url(self) -> str:
        return self._server.url if self.running else ""

    @property
    def stats(self) -> ServerStats | None:
        return self._server.stats if self.running else None

    def address(self) -> tuple[str, int]:
        """Where it listens (or will): host and port (0: any free port)."""
        host = self._store.setting(HOST_KEY) or DEFAULT_HOST
        port = self._store.setting(PORT_KEY)
        return str(host), DEFAULT_PORT if port is None else int(port)

    def set_address(self, host: str, port: int, *, restart: bool = True) -> None:
        """Keep where it listens; a running server restarts there (unless `restart` is False:
        the caller restarts it once after several changes)."""
        if (host, port) == self.address():
            return
        self._store.set_setting(HOST_KEY, host)
        self._store.set_setting(PORT_KEY, int(port))
        if restart:
            self.restart()

    def api_key(self) -> str | None:
        """The key clients must send: the keyring's, else $TANDEM_API_KEY, else none."""
        try:
            key = keyring.get_password(KEYRING_SERVICE, KEYRING_USER)
        except KeyringError as exc:
            if self.keyring_problem is None:  # said once, not on every read
                logging.getLogger(__name__).warning("cannot read the server key: %s", exc)
            self.keyring_problem = str(exc)
            key = None
        return key or os.environ.get(API_KEY_ENV) or None

    def set_api_key(self, key: str, *, restart: bool = True) -> bool:
        """Keep `key` in the keyring ("" forgets it); a running server restarts with it (unless
        `restart` is False). False (and `failed`) when the system has no keyring."""
        try:
            if key:
                keyring.set_password(KEYRING_SERVICE, KEYRING_USER, key)
            elif keyring.get_password(KEYRING_SERVICE, KEYRING_USER) is not None:
                keyring.delete_password(KEYRING_SERVICE, KEYRING_USER)
        except KeyringError as exc:
            self.failed.emit(f"The key could not be kept in the system keyring: {exc}")
            return False
        if restart:
            self.restart()
        return True

    def restart(self) -> None:
        """A running server starts again with the settings kept now (nothing when off)."""
        if self.running:
            previous = self._task
            self._task = asyncio.ensure_future(self._restart(previous))

    async def _restart(self, previous: asyncio.Task | None) -> None:
        await self._switch(False, previous)
        await self._switch(True, None)

    def _stats_polled(self, _stats: object) -> None:
        self.statsChanged.emit(self.stats)

    def restore(self) -> None:
        """Start it again if it was on when Tandem last closed."""
        if self._store.setting(ENABLED_KEY, False):
            self.set_enabled(True)

    def set_enabled(self, on: bool) -> None:
        self._store.set_setting(ENABLED_KEY, bool(on))
        previous = self._task
        self._task = asyncio.ensure_future(self._switch(on, previous))

    async def wait(self) -> None:
        """Until the last switch has happened (for tests and shutdown)."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def stop(self) -> None:
        await self.wait()
        await self._switch(False, None)

    async def _switch(self, on: bool, previous: asyncio.Task | None) -> None:
        if previous is not None and not previous.done():
            await asyncio.wait([previous])
        if on and not self.running:
            host, port = self.address()
            server = LocalServer(self._bridge.engine, host=host, port=port, api_key=self.api_key())
            try:
                await server.start()
            except OSError as exc:
                logging.getLogger(__name__).warning("local server: %s", exc)
                self._store.set_setting(ENABLED_KEY, False)
                self.failed.emit(
                    f"The local server cannot listen on {host} port {port}: "
                    f"{exc.strerror or exc} (another program may use it)"
                )
                self.stateChanged.emit(False, "")
                return
            self._server = server
            self.stateChanged.emit(True, server.url)
        elif not on and self._server is not None:
            server, self._server = self._server, None
            await server.stop()
            self.stateChanged.emit(False, "")
        self.statsChanged.emit(self.stats)
