"""Shared pieces of the remote-backend tests: an in-memory keyring (the system keyring's
stand-in: keyring's own backend interface), a real mlx_lm.server process, and small HTTP
servers that misbehave on purpose (hang, drop the stream)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import keyring
from aiohttp import web
from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError

ROOT = Path(__file__).resolve().parents[2]
MLX_LM_START_TIMEOUT_S = 120.0


class MemoryKeyring(KeyringBackend):
    """Passwords in a dict, for tests."""

    priority = 1

    def __init__(self) -> None:
        super().__init__()
        self.passwords: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.passwords.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.passwords[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if self.passwords.pop((service, username), None) is None:
            raise PasswordDeleteError(username)


def use_memory_keyring() -> MemoryKeyring:
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    return backend


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MlxLmServer:
    """`python -m mlx_lm.server` on a model folder, in its own process."""

    def __init__(self, model_dir: Path) -> None:
        self.port = free_port()
        self.model_dir = Path(model_dir)
        self.url = f"http://127.0.0.1:{self.port}/v1"
        # its /v1/models scans the Hugging Face cache and fails when there is none
        self.hub = tempfile.TemporaryDirectory(prefix="tandem-hf-hub-")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mlx_lm.server",
                "--model",
                str(model_dir),
                "--port",
                str(self.port),
                "--temp",
                "0.0",
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, "HF_HUB_CACHE": self.hub.name, "HF_HUB_OFFLINE": "1"},
        )
        deadline = time.monotonic() + MLX_LM_START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(self.process.stderr.read().decode()[-2000:])
            try:
                with urllib.request.urlopen(self.url + "/models", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    self.close()
                    raise TimeoutError("mlx_lm.server did not start") from None
                time.sleep(0.2)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.hub.cleanup()


async def misbehaving_server(kind: str) -> tuple[web.AppRunner, str]:
    """A server whose chat completions hang ("hang") or stream two pieces then cut the
    connection ("drop"); its /v1/models answers normally."""

    async def models(_request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})

    async def chat(request: web.Request) -> web.StreamResponse:
        if kind == "hang":
            await asyncio.sleep(3600)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for piece in ("Hello", " there"):
            delta = {"index": 0, "delta": {"content": piece}, "finish_reason": None}
            await response.write(f"data: {json.dumps({'choices': [delta]})}\n\n".encode())
        await asyncio.sleep(0.1)
        request.transport.close()  # the connection drops mid-reply
        return response

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
