"""`tandem serve`: the engine and its OpenAI-compatible server, headless (no Qt is imported)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys

import engine  # noqa: F401 - interposes OpenBLAS before anything loads MLX
from server.app_factory import DEFAULT_MAX_BODY_BYTES
from server.local_server import DEFAULT_HOST, DEFAULT_PORT, LocalServer

API_KEY_ENV = "TANDEM_API_KEY"
LOOPBACK = ("127.0.0.1", "::1", "localhost")

log = logging.getLogger("tandem.serve")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="tandem serve",
        description="Serve a local model over an OpenAI-compatible API (no window).",
    )
    parser.add_argument(
        "--model", help="a model folder or Hugging Face repo id (default: the built-in model)"
    )
    parser.add_argument("--draft-model", help="a draft model for speculative decoding")
    parser.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"the address to listen on (default {DEFAULT_HOST}: this machine only)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"the port (default {DEFAULT_PORT}; 0 picks a free one)",
    )
    parser.add_argument(
        "--api-key",
        default=os.environ.get(API_KEY_ENV),
        help=f"require this key as 'Authorization: Bearer KEY' (or ${API_KEY_ENV})",
    )
    parser.add_argument(
        "--max-body-mb",
        type=float,
        default=DEFAULT_MAX_BODY_BYTES / (1 << 20),
        help="the largest request body, in MiB",
    )
    parser.add_argument("--verbose", action="store_true", help="log more")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.host not in LOOPBACK and not args.api_key:
        print(
            f"warning: listening on {args.host} without an API key: anyone who can reach "
            "this machine can use the model",
            file=sys.stderr,
            flush=True,
        )
    try:
        code = asyncio.run(serve(args))
    except KeyboardInterrupt:
        code = 0
    leave(code)
    return code  # not reached


def leave(code: int) -> None:
    """End the process once the engine has stopped and everything is flushed, without the
    interpreter's teardown: MLX used from the engine's thread can abort in its static
    destructors at exit ("terminate called without an active exception", exit code 134, mlx
    issue #3126), which a user would see as a crash after Ctrl+C."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


async def serve(args: argparse.Namespace) -> int:
    from engine.api import Engine, EngineConfig

    eng = Engine(EngineConfig(model=args.model, draft_model=args.draft_model))
    eng.start()
    server = LocalServer(
        eng,
        host=args.host,
        port=args.port,
        api_key=args.api_key,
        max_body_bytes=int(args.max_body_mb * (1 << 20)),
    )
    try:
        try:  # listen first: a taken port is said at once, not after the model has loaded
            await server.start()
        except OSError as exc:
            print(
                f"failed: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
                file=sys.stderr,
                flush=True,
            )
            return 1
        try:
            info = await eng.wait_ready()
        except Exception as exc:  # noqa: BLE001 - said once, plainly, then exit
            print(f"failed: {exc}", file=sys.stderr, flush=True)
            return 1
        print(
            f"serving {info.name} at {server.url}"
            + (" (API key required)" if args.api_key else ""),
            flush=True,
        )
        await _until_signalled()
        return 0
    finally:
        await server.stop()
        await eng.stop()


async def _until_signalled() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # Windows: Ctrl+C raises KeyboardInterrupt
            pass
    await stop.wait()
