"""A real engine on a tiny random model with `tandem serve`'s server on a free port, run in a
thread of its own so tests can be the server's clients (the official openai client, raw HTTP)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from mlx_lm.generate import stream_generate

from engine.api import Engine, EngineConfig
from engine.prompt import apply_chat_template
from server.local_server import LocalServer

TIMEOUT_S = 120.0  # only turns a hang into a failure


class ServerThread:
    """An event loop in a thread holding one engine and any number of servers on it."""

    def __init__(self, model_dir: Any, **config: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.engine = Engine(EngineConfig(model=str(model_dir), log_blas=False, **config))

        async def start() -> None:
            self.engine.start()
            await self.engine.wait_ready()

        self.call(start)

    def call(self, fn: Callable[[], Awaitable[Any]]) -> Any:
        return asyncio.run_coroutine_threadsafe(fn(), self.loop).result(TIMEOUT_S)

    def serve(self, **options: Any) -> LocalServer:
        server = LocalServer(self.engine, port=0, **options)
        self.call(server.start)
        return server

    def close(self, *servers: LocalServer) -> None:
        async def stop() -> None:
            for server in servers:
                await server.stop()
            await self.engine.stop()

        self.call(stop)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(TIMEOUT_S)
        self.loop.close()


class Reference:
    """What mlx_lm.generate alone produces at temperature 0 (tokens and their text)."""

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self._kept: dict[tuple, tuple[str, int]] = {}

    def generate(self, prompt: list[int], max_tokens: int) -> tuple[str, int]:
        """mlx_lm's text (its streaming detokenizer's pieces) and token count, EOS dropped."""
        key = (tuple(prompt), max_tokens)
        if key not in self._kept:
            eos = self.tokenizer.eos_token_ids
            text, count = [], 0
            for r in stream_generate(self.model, self.tokenizer, prompt, max_tokens=max_tokens):
                text.append(r.text)
                count += not (r.finish_reason == "stop" and r.token in eos)
            self._kept[key] = ("".join(text), count)
        return self._kept[key]

    def chat(self, messages: list[dict[str, str]], max_tokens: int) -> tuple[str, int]:
        return self.generate(apply_chat_template(messages, self.tokenizer), max_tokens)

    def completion(self, prompt: str, max_tokens: int) -> tuple[str, int]:
        return self.generate(self.tokenizer.encode(prompt), max_tokens)
