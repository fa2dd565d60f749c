"""Which model names a client may ask for: the models the engine holds and the models on this
machine (engine.api.list_local_models); anything else is an unknown model, never a path that
the server would go and load."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from engine.api import Engine, list_local_models
from server.errors import ApiError

DEFAULT_LISTING_TTL_S = 30.0  # the local models are listed again at most this often


@dataclass(frozen=True)
class ServedModel:
    """A model id as /v1/models shows it, and the spec the engine loads it by."""

    id: str
    spec: str | None  # None: the engine's configured model
    loaded: bool
    created: int


class ModelDirectory:
    """Maps the `model` of API requests to engine model specs."""

    def __init__(self, engine: Engine, *, listing_ttl_s: float = DEFAULT_LISTING_TTL_S) -> None:
        self._engine = engine
        self._ttl_s = listing_ttl_s
        self._local: list[ServedModel] = []
        self._listed_at = -float("inf")
        self._started = int(time.time())

    async def models(self) -> list[ServedModel]:
        """The configured model first, then the other loaded ones, then the rest on disk."""
        stats = self._engine.stats()
        out: list[ServedModel] = []
        seen: set[str] = set()
        for model in sorted(stats.models, key=lambda m: not m.configured):
            if model.info is None or model.name in seen:
                continue
            seen.add(model.name)
            spec = None if model.configured else model.key
            out.append(ServedModel(model.name, spec, True, self._started))
        for entry in await self._local_models():
            if entry.id not in seen:
                seen.add(entry.id)
                out.append(entry)
        return out

    def default_name(self) -> str:
        stats = self._engine.stats()
        return stats.model.name if stats.model is not None else "default"

    async def resolve(
        self, name: str | None, *, param: str = "model", as_draft: bool = False
    ) -> str | None:
        """The engine spec for `name` (None or "": the configured model); ApiError if unknown.
        A draft model is named by its own spec (None would mean the configured draft)."""
        if not name:
            return None
        stats = self._engine.stats()
        for model in stats.models:
            if name == model.name or name == model.key or name in model.specs:
                return None if model.configured and not as_draft else model.key
        if stats.model is not None and name == stats.model.name:
            return stats.model.path if as_draft else None
        for entry in await self._local_models():
            if name == entry.id:
                return entry.spec
        raise ApiError(
            f"The model {name!r} does not exist on this server; GET /v1/models lists its models",
            param=param,
            code="model_not_found",
        )

    async def _local_models(self) -> list[ServedModel]:
        if time.monotonic() - self._listed_at > self._ttl_s:
            entries = await asyncio.get_running_loop().run_in_executor(None, list_local_models)
            self._local = [ServedModel(e.name, e.spec, False, self._started) for e in entries]
            self._listed_at = time.monotonic()
        return self._local
