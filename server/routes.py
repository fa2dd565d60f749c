"""The OpenAI endpoints: /v1/models, /v1/chat/completions and /v1/completions, each request
submitted to the engine on its own and cancelled there the moment its client goes away."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing

from aiohttp import web

from engine.api import Engine
from engine.requests import ErrorEvent, Event, FinishedEvent, SpeculativeParams, TokenEvent
from server.errors import SERVER_ERROR, ApiError
from server.model_directory import ModelDirectory
from server.prompt_tokenizer import PromptTokenizer
from server.request_parsing import ParsedRequest, parse_chat, parse_completion, with_model
from server.responses import SSE_DONE, ResponseShape, models_list, sse
from server.server_stats import ServerStats

log = logging.getLogger(__name__)

ENGINE_STOPPED = "the engine stopped"
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


class OpenAIRoutes:
    """Answers the OpenAI API's requests from one engine."""

    def __init__(self, engine: Engine, stats: ServerStats) -> None:
        self.engine = engine
        self.stats = stats
        self.models = ModelDirectory(engine)
        self.tokenizer = PromptTokenizer(engine)

    def add_to(self, app: web.Application) -> None:
        app.router.add_get("/v1/models", self.list_models)
        app.router.add_get("/v1/models/{model:.+}", self.one_model)
        app.router.add_post("/v1/chat/completions", self.chat_completions)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_get("/health", self.health)

    async def health(self, _request: web.Request) -> web.Response:
        stats = self.engine.stats()
        return web.json_response({"status": stats.status, "running": self.stats.running})

    async def list_models(self, _request: web.Request) -> web.Response:
        return web.json_response(models_list(await self.models.models()))

    async def one_model(self, request: web.Request) -> web.Response:
        name = request.match_info["model"]
        for model in await self.models.models():
            if model.id == name:
                return web.json_response(models_list([model])["data"][0])
        raise ApiError(f"The model {name!r} does not exist", status=404, code="model_not_found")

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._answer(request, parse_chat, chat=True)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._answer(request, parse_completion, chat=False)

    # -- one request -----------------------------------------------------------------------------

    async def _answer(
        self, http: web.Request, parse: Callable[[object], ParsedRequest], *, chat: bool
    ) -> web.StreamResponse:
        parsed = parse(await read_json(http))
        spec = await self.models.resolve(parsed.model)
        draft = parsed.request.speculative.draft_model
        if draft is not None:
            draft_spec = await self.models.resolve(draft, param="speculative", as_draft=True)
            parsed.request.speculative = _with_draft(parsed, draft_spec)
        tokens = None
        if parsed.prompt_text is not None:
            tokens = await self.tokenizer.encode(parsed.prompt_text, model=spec)
        with_model(parsed, spec, tokens)
        shape = ResponseShape(chat=chat, model=parsed.model or self.models.default_name())
        self.stats.running += 1
        try:
            async with aclosing(self.engine.submit(parsed.request)) as events:
                if parsed.stream:
                    return await self._stream(http, events, shape, parsed.include_usage)
                return await self._whole(events, shape)
        except (asyncio.CancelledError, ConnectionError):
            self.stats.cancelled += 1  # the client went away; closing `events` cancelled it
            raise
        finally:
            self.stats.running -= 1

    async def _whole(self, events: AsyncIterator[Event], shape: ResponseShape) -> web.Response:
        started = False
        async for event in events:
            if isinstance(event, TokenEvent):
                started = started or bool(event.token_ids)
            elif isinstance(event, FinishedEvent):
                self._finished(event)
                body = shape.whole(
                    event.text, event.finish_reason, event.stats, len(event.token_ids)
                )
                return web.json_response(body)
            elif isinstance(event, ErrorEvent):
                raise self._failure(event, started)
        raise ApiError("the request ended without a result", status=500, kind=SERVER_ERROR)

    async def _stream(
        self,
        http: web.Request,
        events: AsyncIterator[Event],
        shape: ResponseShape,
        include_usage: bool,
    ) -> web.StreamResponse:
        # headers go out with the first token, so a request the engine refuses at admission
        # (a prompt longer than the context, say) still gets a plain 400
        response: web.StreamResponse | None = None

        async def opened() -> web.StreamResponse:
            stream = web.StreamResponse(headers=SSE_HEADERS)
            await stream.prepare(http)
            if shape.chat:
                await stream.write(shape.chunk("", first=True))
            return stream

        async for event in events:
            if isinstance(event, TokenEvent):
                if response is None:
                    response = await opened()
                if event.text:
                    await response.write(shape.chunk(event.text))
            elif isinstance(event, FinishedEvent):
                response = response or await opened()
                self._finished(event)
                await response.write(shape.chunk("", finish=event.finish_reason))
                if include_usage:
                    await response.write(shape.usage_chunk(event.stats, len(event.token_ids)))
                await response.write(SSE_DONE)
                await response.write_eof()
                return response
            elif isinstance(event, ErrorEvent):
                failure = self._failure(event, response is not None)
                if response is None:
                    raise failure
                await response.write(sse(failure.body()))
                await response.write_eof()
                return response
        raise ApiError("the request ended without a result", status=500, kind=SERVER_ERROR)

    def _finished(self, event: FinishedEvent) -> None:
        self.stats.served += 1
        self.stats.generated_tokens += len(event.token_ids)

    def _failure(self, event: ErrorEvent, started: bool) -> ApiError:
        """Before any output the engine refused the request (400) or had stopped (503); after
        it, the reply broke off (500)."""
        if event.message.startswith(ENGINE_STOPPED):
            self.stats.failed += 1
            return ApiError(event.message, status=503, kind=SERVER_ERROR)
        if started:
            self.stats.failed += 1
            return ApiError(event.message, status=500, kind=SERVER_ERROR)
        return ApiError(event.message)


async def read_json(http: web.Request) -> object:
    """The body as JSON; the size limit is the application's client_max_size."""
    raw = await http.read()
    if not raw:
        raise ApiError("the request has no body: send a JSON object")
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ApiError(f"the request body is not valid JSON: {exc}") from None


def _with_draft(parsed: ParsedRequest, draft_spec: str | None) -> SpeculativeParams:
    return dataclasses.replace(parsed.request.speculative, draft_model=draft_spec)
