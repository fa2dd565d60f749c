"""The remote servers the user added: name and URL in the store's settings, the API key in the
system keyring (never in SQLite)."""

from __future__ import annotations

import logging
import uuid
from dataclasses import asdict, dataclass
from urllib.parse import urlsplit

import keyring
from keyring.errors import KeyringError

from app.store.conversation_store import Store

log = logging.getLogger(__name__)

SERVERS_KEY = "remote_servers"
KEYRING_SERVICE = "Tandem remote servers"


@dataclass(frozen=True)
class RemoteServer:
    """An OpenAI-compatible endpoint: its base URL ends in /v1."""

    id: str
    name: str
    url: str


def normalized_url(url: str) -> str:
    """The base URL as OpenAI clients take it: scheme and host, ending in /v1."""
    text = url.strip().rstrip("/")
    if text and "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http:// or https:// address")
    if not parts.path.endswith("/v1"):
        text += "/v1"
    return text


class ServerRegistry:
    """Adds, lists and removes remote servers."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def servers(self) -> list[RemoteServer]:
        kept = self._store.setting(SERVERS_KEY, []) or []
        return [
            RemoteServer(**s)
            for s in kept
            if isinstance(s, dict) and {"id", "name", "url"} <= set(s)
        ]

    def get(self, server_id: str) -> RemoteServer | None:
        return next((s for s in self.servers() if s.id == server_id), None)

    def add(self, url: str, *, name: str = "", api_key: str = "") -> RemoteServer:
        """Keep a server (ValueError for a bad URL); its key goes to the keyring."""
        base = normalized_url(url)
        server = RemoteServer(uuid.uuid4().hex[:8], name.strip() or urlsplit(base).netloc, base)
        self.set_key(server, api_key)  # first: no keyring, no server kept without its key
        self._save([*self.servers(), server])
        return server

    def remove(self, server_id: str) -> None:
        server = self.get(server_id)
        if server is None:
            return
        self.set_key(server, "")
        self._save([s for s in self.servers() if s.id != server_id])

    def key(self, server: RemoteServer) -> str:
        try:
            return keyring.get_password(KEYRING_SERVICE, server.id) or ""
        except KeyringError as exc:
            log.warning("cannot read the key of %s from the keyring: %s", server.name, exc)
            return ""

    def set_key(self, server: RemoteServer, api_key: str) -> None:
        """Store (or, when empty, forget) the server's key; raises KeyringError when the system
        has no keyring to keep it in."""
        if api_key:
            keyring.set_password(KEYRING_SERVICE, server.id, api_key)
            return
        try:
            keyring.delete_password(KEYRING_SERVICE, server.id)
        except KeyringError:
            pass  # there was none

    def _save(self, servers: list[RemoteServer]) -> None:
        self._store.set_setting(SERVERS_KEY, [asdict(s) for s in servers])
