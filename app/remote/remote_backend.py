"""A chat's request on a remote OpenAI-compatible server: streamed over server-sent events and
answered with the engine's own events (TokenEvent, StatsEvent, FinishedEvent, ErrorEvent), with
what the client can measure (time to first token, tokens/s). Closing the event stream (the
user pressed Stop) closes the connection, which cancels the request on the server."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from app.remote.remote_spec import parse_remote
from app.remote.server_registry import RemoteServer, ServerRegistry
from engine.requests import (
    ErrorEvent,
    Event,
    FinishedEvent,
    FinishReason,
    GenerationRequest,
    RequestStats,
    SpecMethod,
    StatsEvent,
    TokenEvent,
)

log = logging.getLogger(__name__)

DEFAULT_CONNECT_TIMEOUT_S = 10.0
DEFAULT_READ_TIMEOUT_S = 120.0  # the longest wait for the next piece (a remote model may load)
DEFAULT_STATS_INTERVAL_S = 0.25
FINISH_REASONS = {"stop": FinishReason.STOP, "length": FinishReason.LENGTH}


class RemoteError(Exception):
    """A remote server could not be used; the message says why, for the user."""


class RemoteBackend:
    """Remote servers' models and replies, for the chats whose model is a remote spec."""

    def __init__(
        self,
        registry: ServerRegistry,
        *,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
    ) -> None:
        self.registry = registry
        self.read_timeout_s = read_timeout_s
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=connect_timeout_s, sock_read=read_timeout_s
        )
        self._session: aiohttp.ClientSession | None = None

    async def list_models(self, server: RemoteServer) -> list[str]:
        """The model ids the server's /v1/models lists; RemoteError with the reason."""
        try:
            async with self._http().get(server.url + "/models", headers=self._headers(server)) as r:
                if r.status >= 400:
                    raise RemoteError(await _http_error(server, r))
                body = await r.json(content_type=None)
        except aiohttp.ClientError as exc:
            raise RemoteError(_connection_error(server, exc)) from None
        except (TimeoutError, asyncio.TimeoutError):
            raise RemoteError(_timeout_error(server, self.read_timeout_s)) from None
        except (ValueError, TypeError):
            raise RemoteError(f"{server.name} did not answer /v1/models with JSON") from None
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise RemoteError(f"{server.name} answered /v1/models without a list of models")
        return [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]

    def submit(self, request: GenerationRequest) -> AsyncIterator[Event]:
        return self._stream(request)

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    # -- one reply -----------------------------------------------------------------------------

    async def _stream(self, request: GenerationRequest) -> AsyncIterator[Event]:
        rid = request.request_id
        server_id, model = parse_remote(request.model or "")
        server = self.registry.get(server_id)
        if server is None:
            yield ErrorEvent(rid, "This chat's remote server was removed: pick another model")
            return
        if request.continue_reply:
            yield ErrorEvent(
                rid, f"{server.name} cannot continue a cut-short reply; regenerate it instead"
            )
            return
        meter = _Meter()
        text: list[str] = []
        finish: FinishReason | None = None
        try:
            async with self._http().post(
                server.url + "/chat/completions",
                json=request_body(request, model),
                headers=self._headers(server),
            ) as response:
                if response.status >= 400:
                    yield ErrorEvent(rid, await _http_error(server, response), meter.stats)
                    return
                async for data in _sse(response):
                    if isinstance(data.get("error"), dict | str):
                        error = data["error"]
                        said = error.get("message") if isinstance(error, dict) else error
                        yield ErrorEvent(
                            rid, f"{server.name} stopped the reply: {said}", meter.stats
                        )
                        return
                    meter.usage(data.get("usage"))
                    for choice in data.get("choices") or []:
                        delta = (choice.get("delta") or {}).get("content") or ""
                        if delta:
                            meter.piece()
                            text.append(delta)
                            yield TokenEvent(rid, [], delta, [])
                        if choice.get("finish_reason"):
                            finish = FINISH_REASONS.get(choice["finish_reason"], FinishReason.STOP)
                    if meter.due():
                        yield StatsEvent(rid, meter.stats)
        except aiohttp.ClientConnectorError as exc:
            yield ErrorEvent(rid, _connection_error(server, exc), meter.stats)
            return
        except (TimeoutError, asyncio.TimeoutError):
            yield ErrorEvent(rid, _timeout_error(server, self.read_timeout_s), meter.stats)
            return
        except (aiohttp.ClientError, ConnectionError) as exc:
            yield ErrorEvent(rid, _dropped(server, exc), meter.stats)
            return
        if finish is None:
            yield ErrorEvent(rid, _dropped(server, None), meter.stats)
            return
        stats = meter.stats
        stats.finish_reason = finish
        yield FinishedEvent(rid, finish, "".join(text), [], stats)

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self._session

    def _headers(self, server: RemoteServer) -> dict[str, str]:
        key = self.registry.key(server)
        return {"Authorization": f"Bearer {key}"} if key else {}


def request_body(request: GenerationRequest, model: str) -> dict[str, Any]:
    """The chat's request as OpenAI's chat completion; the non-standard fields (top_k, min_p,
    repetition_penalty, Tandem's speculative) only when they are not off."""
    sampling, spec = request.sampling, request.speculative
    body: dict[str, Any] = {
        "model": model,
        "messages": request.messages or [],
        "max_tokens": request.max_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.stop:
        body["stop"] = list(request.stop)
    if sampling.seed is not None:
        body["seed"] = sampling.seed
    if sampling.top_k:
        body["top_k"] = sampling.top_k
    if sampling.min_p:
        body["min_p"] = sampling.min_p
    if sampling.repetition_penalty != 1.0:
        body["repetition_penalty"] = sampling.repetition_penalty
    method = SpecMethod(spec.method)
    if method is not SpecMethod.OFF and method is not SpecMethod.DRAFT_MODEL:
        body["speculative"] = {
            "method": method.value,
            "draft_tokens": spec.draft_tokens,
            "ngram_min": spec.ngram_min,
            "ngram_max": spec.ngram_max,
        }
    return body


async def _sse(response: aiohttp.ClientResponse) -> AsyncIterator[dict[str, Any]]:
    """The JSON data of each server-sent event, until [DONE] or the end of the body."""
    lines: list[str] = []
    async for raw in response.content:
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if line.startswith("data:"):
            lines.append(line[5:].lstrip())
            continue
        if line or not lines:
            continue  # comments, other fields, keep-alive blank lines
        data, lines = "\n".join(lines), []
        if data == "[DONE]":
            return
        try:
            parsed = json.loads(data)
        except json.JSONDecodeError:
            log.warning("a server-sent event that is not JSON: %.80s", data)
            continue
        if isinstance(parsed, dict):
            yield parsed


class _Meter:
    """Time to first token and tokens/s as the client sees them (one streamed piece counts as
    a token until the server's usage gives the exact count)."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.first: float | None = None
        self.last_stats = 0.0
        self.stats = RequestStats()

    def piece(self) -> None:
        now = time.monotonic()
        if self.first is None:
            self.first = now
            self.stats.ttft_s = now - self.start
        self.stats.generated_tokens += 1
        self._rate(now)

    def usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        if isinstance(usage.get("completion_tokens"), int):
            self.stats.generated_tokens = usage["completion_tokens"]
        if isinstance(usage.get("prompt_tokens"), int):
            self.stats.prompt_tokens = usage["prompt_tokens"]
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
            self.stats.cached_tokens = details["cached_tokens"]
        self.stats.context_tokens = self.stats.prompt_tokens + self.stats.generated_tokens
        self._rate(time.monotonic())

    def due(self) -> bool:
        now = time.monotonic()
        if now - self.last_stats < DEFAULT_STATS_INTERVAL_S:
            return False
        self.last_stats = now
        return True

    def _rate(self, now: float) -> None:
        self.stats.elapsed_s = now - self.start
        if self.first is not None and now > self.first and self.stats.generated_tokens > 1:
            self.stats.decode_tokens_per_s = (self.stats.generated_tokens - 1) / (now - self.first)


async def _http_error(server: RemoteServer, response: aiohttp.ClientResponse) -> str:
    try:
        body = await response.json(content_type=None)
        error = body.get("error") if isinstance(body, dict) else None
        said = error.get("message") if isinstance(error, dict) else (error or body)
    except (ValueError, aiohttp.ClientError):
        said = (await response.text())[:200] if response.content else ""
    said = f": {said}" if said else ""
    if response.status in (401, 403):
        return (
            f"{server.name} refused the API key (HTTP {response.status}){said}. "
            "Check the key in Models ▸ Remote servers."
        )
    return f"{server.name} answered HTTP {response.status}{said}"


def _connection_error(server: RemoteServer, exc: Exception) -> str:
    reason = getattr(getattr(exc, "os_error", None), "strerror", None) or str(exc)
    return f"Cannot reach {server.name} at {server.url}: {reason}. Is the server running?"


def _timeout_error(server: RemoteServer, seconds: float) -> str:
    return f"{server.name} stopped answering: nothing came for {seconds:g} s"


def _dropped(server: RemoteServer, exc: Exception | None) -> str:
    if exc is not None:
        log.info("the stream from %s broke: %r", server.name, exc)
    return (
        f"The connection to {server.name} dropped before the reply ended; the text so far is kept"
    )
