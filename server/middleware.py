"""Every request's guards: the optional API key, and errors as OpenAI-style JSON (a bad
request, an oversized body, a route that does not exist, a bug) instead of HTML pages."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from server.errors import AUTHENTICATION, SERVER_ERROR, ApiError
from server.server_stats import ServerStats

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
OPEN_PATHS = ("/health",)  # answered without the key


def error_middleware(stats: ServerStats, max_body_bytes: int):
    """Turn every failure into an OpenAI error body; count the refused ones."""

    @web.middleware
    async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except ApiError as exc:
            stats.refused += exc.status < 500
            return exc.response()
        except web.HTTPRequestEntityTooLarge:
            stats.refused += 1
            return ApiError(
                f"the request body is larger than this server's limit of {max_body_bytes} bytes",
                status=413,
            ).response()
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            stats.refused += 1
            return ApiError(
                f"{exc.reason}: {request.method} {request.path}", status=exc.status
            ).response()
        except (ConnectionError, TimeoutError):
            raise
        except Exception as exc:  # noqa: BLE001 - one request's bug must not reach the others
            log.exception("request %s %s failed", request.method, request.path)
            return ApiError(f"the server failed: {exc}", status=500, kind=SERVER_ERROR).response()

    return errors


def api_key_middleware(api_key: str):
    """Requests must carry `Authorization: Bearer <api_key>`."""
    expected = f"Bearer {api_key}".encode()

    @web.middleware
    async def check_key(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path not in OPEN_PATHS:
            given = request.headers.get("Authorization", "").strip().encode()
            if not hmac.compare_digest(given, expected):
                raise ApiError(
                    "Incorrect or missing API key: send the header 'Authorization: Bearer <key>'",
                    status=401,
                    kind=AUTHENTICATION,
                    code="invalid_api_key",
                )
        return await handler(request)

    return check_key
