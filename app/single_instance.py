"""One Tandem per data folder. A lock file in the folder says who owns it (a crashed owner's lock
is taken over); the owner listens on a local socket named after the folder, and a second launch
sends it "activate" (bring the window to the front) and exits."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from PySide6.QtCore import QLockFile, QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

log = logging.getLogger(__name__)

LOCK_NAME = "tandem.lock"
ACTIVATE = b"activate\n"
DEFAULT_TIMEOUT_MS = 2000


def server_name(folder: Path) -> str:
    """The local socket's name for a data folder: the same for every path spelling of it."""
    digest = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:20]
    return f"tandem-{digest}"


class SingleInstance(QObject):
    """Owns the data folder's lock while Tandem runs; `activateRequested` when launched again."""

    activateRequested = Signal()

    def __init__(self, folder: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.folder = Path(folder)
        self.name = server_name(self.folder)
        self._lock = QLockFile(str(self.folder / LOCK_NAME))
        self._lock.setStaleLockTime(0)  # stale only when its process is gone, never by age
        self._server: QLocalServer | None = None

    def acquire(self) -> bool:
        """Take the folder (True), or find it taken by a running Tandem (False)."""
        if not self._lock.tryLock(0):
            if self._lock.error() != QLockFile.LockError.LockFailedError:
                raise OSError(f"cannot create the lock file in {self.folder}: {self._lock.error()}")
            return False
        QLocalServer.removeServer(self.name)  # a socket file left by a crash
        self._server = QLocalServer(self)
        self._server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        if not self._server.listen(self.name):
            log.warning("cannot listen on %s: %s", self.name, self._server.errorString())
        self._server.newConnection.connect(self._connection)
        return True

    def release(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        self._lock.unlock()

    def owner_pid(self) -> int | None:
        """The process that holds the lock, when another one does."""
        pid, _host, _app = self._lock.getLockInfo()  # (0, "", "") when there is none
        return pid or None

    def activate_owner(self, *, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> bool:
        """Ask the running Tandem to bring its window to the front; True if it got the message."""
        socket = QLocalSocket()
        socket.connectToServer(self.name)
        if not socket.waitForConnected(timeout_ms):
            return False
        socket.write(ACTIVATE)
        sent = socket.waitForBytesWritten(timeout_ms)
        socket.disconnectFromServer()
        if socket.state() != QLocalSocket.LocalSocketState.UnconnectedState:
            socket.waitForDisconnected(timeout_ms)
        return sent

    def _connection(self) -> None:
        while self._server is not None and self._server.hasPendingConnections():
            socket = self._server.nextPendingConnection()
            socket.readyRead.connect(lambda s=socket: self._read(s))
            socket.disconnected.connect(socket.deleteLater)
            self._read(socket)  # what arrived before readyRead was connected

    def _read(self, socket: QLocalSocket) -> None:
        while socket.canReadLine():
            if bytes(socket.readLine().data()) == ACTIVATE:
                log.info("another launch asked for the window")
                self.activateRequested.emit()
