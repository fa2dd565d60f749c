"""How a chat's model setting names a model on a remote server: "remote:<server id>:<model id>"
(a model id may hold slashes and colons; a server id holds neither)."""

from __future__ import annotations

REMOTE_PREFIX = "remote:"


def remote_spec(server_id: str, model: str) -> str:
    return f"{REMOTE_PREFIX}{server_id}:{model}"


def is_remote(spec: str | None) -> bool:
    return bool(spec) and spec.startswith(REMOTE_PREFIX)


def parse_remote(spec: str) -> tuple[str, str]:
    """(server id, model id) of a remote spec; ValueError for anything else."""
    if not is_remote(spec) or ":" not in spec[len(REMOTE_PREFIX) :]:
        raise ValueError(f"not a remote model: {spec!r}")
    server_id, model = spec[len(REMOTE_PREFIX) :].split(":", 1)
    return server_id, model
