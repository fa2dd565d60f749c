"""python -m server.bench: what serving costs. Streaming clients (1, 4, 8 at once, the same
prompts) against `tandem serve` and against the engine called directly (the server's overhead),
and against `mlx_lm.server` on the same model (tokens/s, time to first token), plus prompt
lookup on the rewrite workload. Both servers run as their own processes, as people run them;
runs alternate (the machines are noisy) and each point is the median of the repeats.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import aiohttp

import engine  # noqa: F401 - OpenBLAS before MLX
from engine.api import Engine, EngineConfig
from engine.bench.workloads import messages_for
from engine.requests import (
    ErrorEvent,
    FinishedEvent,
    GenerationRequest,
    SamplingParams,
    SpeculativeParams,
    TokenEvent,
)

DEFAULT_CONCURRENCY = (1, 4, 8)
DEFAULT_MAX_TOKENS = 64
DEFAULT_REPEATS = 2
START_TIMEOUT_S = 300.0
LOOKUP = {"method": "lookup", "draft_tokens": 4}
# mlx_lm.server after `import engine`, which interposes OpenBLAS as our engine has it
MLX_LM_SERVER = (
    "import sys, runpy, engine; sys.argv[0] = 'mlx_lm.server'; "
    "runpy.run_module('mlx_lm.server', run_name='__main__')"
)


@dataclass
class Run:
    """One batch of concurrent requests: aggregate tokens/s and mean time to first token."""

    tokens: int
    wall_s: float
    mean_ttft_s: float

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.wall_s if self.wall_s else 0.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m server.bench", description=__doc__)
    p.add_argument("--model", default=None, help="a model folder (default: the built-in model)")
    p.add_argument("--concurrency", type=int, nargs="+", default=list(DEFAULT_CONCURRENCY))
    p.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS)
    p.add_argument("--repeats", type=int, default=DEFAULT_REPEATS)
    p.add_argument("--rewrite-concurrency", type=int, nargs="*", default=[1, 4])
    p.add_argument("--rewrite-max-tokens", type=int, default=96)
    p.add_argument(
        "--overhead-only",
        action="store_true",
        help="only tandem serve against the engine directly, both on one engine in this process "
        "(the clients too, so their parsing counts against the server)",
    )
    p.add_argument("--json", type=Path, help="write the results here")
    return p.parse_args(argv)


# -- clients ---------------------------------------------------------------------------------


async def stream_clients(
    url: str, conversations: list[list[dict]], max_tokens: int, extra: dict | None = None
) -> Run:
    """Every conversation as a streaming chat completion, all at once."""
    start = time.perf_counter()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as session:

        async def one(messages: list[dict]) -> tuple[int, float]:
            body = {
                "messages": messages,
                "max_tokens": max_tokens,
                "temperature": 0.0,
                "stream": True,
                "stream_options": {"include_usage": True},
                **(extra or {}),
            }
            first, pieces, usage = None, 0, None
            async with session.post(url + "/chat/completions", json=body) as response:
                response.raise_for_status()
                async for raw in response.content:
                    line = raw.decode().strip()
                    if not line.startswith("data:") or line == "data: [DONE]":
                        continue
                    data = json.loads(line[5:])
                    if data.get("usage"):
                        usage = data["usage"]["completion_tokens"]
                    for choice in data.get("choices") or []:
                        if (choice.get("delta") or {}).get("content"):
                            pieces += 1
                            if first is None:
                                first = time.perf_counter() - start
            return (usage if usage is not None else pieces), first or 0.0

        results = await asyncio.gather(*(one(m) for m in conversations))
    wall = time.perf_counter() - start
    return Run(sum(r[0] for r in results), wall, statistics.mean(r[1] for r in results))


async def direct(
    eng: Engine,
    conversations: list[list[dict]],
    max_tokens: int,
    spec: SpeculativeParams | None = None,
) -> Run:
    """The same requests through engine.api, in this process."""
    start = time.perf_counter()

    async def one(messages: list[dict]) -> tuple[int, float]:
        first, count = None, 0
        request = GenerationRequest(
            messages=messages,
            max_tokens=max_tokens,
            sampling=SamplingParams(temperature=0.0),
            speculative=spec or SpeculativeParams(),
        )
        async for event in eng.submit(request):
            if isinstance(event, TokenEvent) and event.token_ids and first is None:
                first = time.perf_counter() - start
            elif isinstance(event, FinishedEvent):
                count = len(event.token_ids)
            elif isinstance(event, ErrorEvent):
                raise RuntimeError(event.message)
        return count, first or 0.0

    results = await asyncio.gather(*(one(m) for m in conversations))
    wall = time.perf_counter() - start
    return Run(sum(r[0] for r in results), wall, statistics.mean(r[1] for r in results))


# -- servers as their own processes ----------------------------------------------------------


class ServerProcess:
    """`tandem serve` or `mlx_lm.server` on a free port, until closed."""

    def __init__(self, kind: str, model: str, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/v1"
        self._hub = tempfile.TemporaryDirectory(prefix="tandem-bench-hub-")
        if kind == "tandem":
            command = [sys.executable, "-m", "server", "--model", model, "--port", str(port)]
        else:  # with OpenBLAS interposed, as our engine has it (else mlx-cpu's reference BLAS)
            command = [
                sys.executable,
                "-c",
                MLX_LM_SERVER,
                "--model",
                model,
                "--port",
                str(port),
                "--temp",
                "0.0",
            ]
        env = {**os.environ, "HF_HUB_CACHE": self._hub.name, "HF_HUB_OFFLINE": "1"}
        self.process = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    async def ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        async with aiohttp.ClientSession() as session:
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(f"the server exited with {self.process.returncode}")
                try:
                    async with session.get(self.url + "/models") as r:
                        if r.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{self.url} did not start")
                await asyncio.sleep(0.3)

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._hub.cleanup()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the sweep -------------------------------------------------------------------------------


def median_run(runs: list[Run]) -> dict:
    return {
        "tokens_per_s": statistics.median(r.tokens_per_s for r in runs),
        "mean_ttft_s": statistics.median(r.mean_ttft_s for r in runs),
        "runs": [asdict(r) | {"tokens_per_s": r.tokens_per_s} for r in runs],
    }


async def bench(args: argparse.Namespace) -> dict:
    from engine.default_model import ensure_default_model

    model = args.model or str(ensure_default_model())
    eng = Engine(EngineConfig(model=model, log_blas=False))
    eng.start()
    info = await eng.wait_ready()
    if args.overhead_only:
        try:
            rows = await overhead_in_process(eng, args)
        finally:
            await eng.stop()
        return report(args, info, rows, [])
    ours = ServerProcess("tandem", model, free_port())
    theirs = ServerProcess("mlx_lm", model, free_port())
    try:
        await asyncio.gather(ours.ready(), theirs.ready())
        chat = messages_for("chat", 1)[:1]
        for warm in (
            lambda: direct(eng, chat, 8),  # first use builds and caches things
            lambda: stream_clients(ours.url, chat, 8),
            lambda: stream_clients(theirs.url, chat, 8),
        ):
            await warm()
        rows = []
        for c in args.concurrency:
            conversations = messages_for("chat", c)
            runs: dict[str, list[Run]] = {"direct": [], "tandem": [], "mlx_lm": []}
            for _ in range(args.repeats):
                runs["direct"].append(await direct(eng, conversations, args.max_tokens))
                runs["tandem"].append(
                    await stream_clients(ours.url, conversations, args.max_tokens)
                )
                runs["mlx_lm"].append(
                    await stream_clients(theirs.url, conversations, args.max_tokens)
                )
            row = {"concurrency": c, **{k: median_run(v) for k, v in runs.items()}}
            report_row("chat", row)
            rows.append(row)
        rewrite = []
        for c in args.rewrite_concurrency:
            conversations = messages_for("rewrite", c)
            runs = {"tandem_lookup": [], "tandem": [], "mlx_lm": []}
            for _ in range(args.repeats):
                runs["tandem_lookup"].append(
                    await stream_clients(
                        ours.url, conversations, args.rewrite_max_tokens, {"speculative": LOOKUP}
                    )
                )
                runs["tandem"].append(
                    await stream_clients(ours.url, conversations, args.rewrite_max_tokens)
                )
                runs["mlx_lm"].append(
                    await stream_clients(theirs.url, conversations, args.rewrite_max_tokens)
                )
            row = {"concurrency": c, **{k: median_run(v) for k, v in runs.items()}}
            report_row("rewrite", row)
            rewrite.append(row)
    finally:
        ours.close()
        theirs.close()
        await eng.stop()
    return report(args, info, rows, rewrite)


async def overhead_in_process(eng: Engine, args: argparse.Namespace) -> list[dict]:
    """Direct calls and streaming clients of a LocalServer on the same engine, alternated."""
    from server.local_server import LocalServer

    server = LocalServer(eng, port=0)
    await server.start()
    try:
        chat = messages_for("chat", 1)[:1]
        await direct(eng, chat, 8)
        await stream_clients(server.url, chat, 8)
        rows = []
        for c in args.concurrency:
            conversations = messages_for("chat", c)
            runs: dict[str, list[Run]] = {"direct": [], "tandem": []}
            for _ in range(args.repeats):
                runs["direct"].append(await direct(eng, conversations, args.max_tokens))
                runs["tandem"].append(
                    await stream_clients(server.url, conversations, args.max_tokens)
                )
            row = {"concurrency": c, **{k: median_run(v) for k, v in runs.items()}}
            report_row("chat (one engine)", row)
            rows.append(row)
        return rows
    finally:
        await server.stop()


def report(args: argparse.Namespace, info, rows: list[dict], rewrite: list[dict]) -> dict:
    return {
        "command": "python -m server.bench " + " ".join(sys.argv[1:]),
        "commit": _commit(),
        "model": info.name,
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "max_tokens": args.max_tokens,
        "chat": rows,
        "rewrite_lookup": rewrite,
    }


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).parent,
        ).stdout.strip()
    except OSError:
        return ""


def report_row(workload: str, row: dict) -> None:
    parts = [f"{workload} c={row['concurrency']}"]
    for key, value in row.items():
        if isinstance(value, dict):
            parts.append(
                f"{key} {value['tokens_per_s']:.1f} tok/s ttft {value['mean_ttft_s'] * 1000:.0f} ms"
            )
    print(" | ".join(parts), flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = asyncio.run(bench(args))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
