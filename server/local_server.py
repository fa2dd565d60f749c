"""The server's life cycle in the running asyncio loop (asyncio's own for `tandem serve`, the
app's qasync loop for the "Local server" toggle)."""

from __future__ import annotations

from aiohttp import web

from engine.api import Engine
from server.app_factory import DEFAULT_MAX_BODY_BYTES, make_app
from server.server_stats import ServerStats

DEFAULT_HOST = "127.0.0.1"  # this machine only, unless told otherwise
DEFAULT_PORT = 8080
DEFAULT_SHUTDOWN_TIMEOUT_S = 5.0


class LocalServer:
    """An OpenAI-compatible server on a started engine; `port=0` picks a free port."""

    def __init__(
        self,
        engine: Engine,
        *,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        api_key: str | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self.engine = engine
        self.host = host
        self.port = port
        self.api_key = api_key
        self.max_body_bytes = max_body_bytes
        self.stats = ServerStats()
        self._runner: web.AppRunner | None = None

    @property
    def running(self) -> bool:
        return self._runner is not None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    async def start(self) -> int:
        """Listen; the bound port. Raises OSError when the port is taken."""
        if self._runner is not None:
            return self.port
        self.stats = ServerStats()
        app = make_app(
            self.engine,
            api_key=self.api_key,
            max_body_bytes=self.max_body_bytes,
            stats=self.stats,
        )
        # handler_cancellation: a client that disconnects cancels its handler, which cancels
        # its engine request at once
        runner = web.AppRunner(
            app,
            handler_cancellation=True,
            access_log=None,
            shutdown_timeout=DEFAULT_SHUTDOWN_TIMEOUT_S,
        )
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = runner.addresses[0][1]
        return self.port

    async def stop(self) -> None:
        """Stop listening; requests still running are cancelled (and so are their rows)."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
