"""The aiohttp application: routes on one engine, behind the key check and the error guard."""

from __future__ import annotations

from aiohttp import web

from engine.api import Engine
from server.middleware import api_key_middleware, error_middleware
from server.routes import OpenAIRoutes
from server.server_stats import ServerStats

DEFAULT_MAX_BODY_BYTES = 32 << 20  # the engine takes 8 Mi characters of prompt, JSON-escaped


def make_app(
    engine: Engine,
    *,
    api_key: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    stats: ServerStats | None = None,
) -> web.Application:
    """The OpenAI-compatible application over `engine` (which the caller starts and stops)."""
    stats = stats if stats is not None else ServerStats()
    middlewares = [error_middleware(stats, max_body_bytes)]
    if api_key:
        middlewares.append(api_key_middleware(api_key))
    app = web.Application(client_max_size=max_body_bytes, middlewares=middlewares)
    OpenAIRoutes(engine, stats).add_to(app)
    return app
