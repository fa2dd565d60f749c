"""One model folder of the matrix: its engine, its `mlx_lm.generate` references, its cases.

The references (`stream_generate` alone, greedy, the engine's prefill chunk as its prefill step
size) are computed before the engine starts, on this thread: two threads never run MLX at once.
Cases run one after the other on one engine (a case waits for all its requests), so a failure
stays with the case that caused it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlx_lm import load as mlx_load
from mlx_lm.generate import stream_generate

from engine.api import Engine, EngineConfig
from engine.bench.synthetic import SyntheticDrafter
from engine.requests import (
    ErrorEvent,
    FinishedEvent,
    GenerationRequest,
    SpeculativeParams,
    TokenEvent,
)
from tests.architectures.cases import OFF, PREFILL_CHUNK, SYNTHETIC, Case, Row, make_cases
from tests.architectures.outcome import CaseOutcome, RowResult, judge
from tests.architectures.tokenizer import TINY_VOCAB

CASE_TIMEOUT_S = 120.0  # turns a hang into a failure; no case comes near it
NGRAM_MAX = 3


class Reference:
    """mlx_lm.generate's greedy replies for one model folder, cached per prompt."""

    def __init__(self, folder: Path) -> None:
        self.model, self.tokenizer = mlx_load(str(folder))
        self._replies: dict[tuple[tuple[int, ...], int], list[int]] = {}
        self._ends: dict[tuple[tuple[int, ...], int], int | None] = {}

    def reply(self, prompt: tuple[int, ...], max_tokens: int) -> list[int]:
        key = (prompt, max_tokens)
        if key not in self._replies:
            eos = self.tokenizer.eos_token_ids
            tokens, end = [], None
            for r in stream_generate(
                self.model,
                self.tokenizer,
                list(prompt),
                max_tokens=max_tokens,
                prefill_step_size=PREFILL_CHUNK,
            ):
                if r.finish_reason == "stop" and r.token in eos:
                    end = r.token
                else:
                    tokens.append(r.token)
            self._replies[key], self._ends[key] = tokens, end
        return self._replies[key]

    def turn(self, prompt: tuple[int, ...], max_tokens: int) -> list[int]:
        """The reply as a next turn's prompt holds it: with the end-of-sequence token that
        ended it, as a chat template writes the end of a turn."""
        tokens = self.reply(prompt, max_tokens)
        end = self._ends[(prompt, max_tokens)]
        return tokens + ([end] if end is not None else [])


@dataclass
class _Stream:
    """A submitted request's events as they arrive."""

    row: Row
    tokens: list[int]
    end: FinishedEvent | ErrorEvent | None = None
    task: asyncio.Future | None = None


class ModelSession:
    """One model folder's engine, references and synthetic drafter, for every case."""

    def __init__(self, arch: str, variant: str, folder: Path) -> None:
        self.arch, self.variant, self.folder = arch, variant, folder
        self.names = [folder.name, arch]  # what a refusal must name
        reference = Reference(folder)
        self.cases = make_cases(reference.reply, reference.turn)
        self.expected = {
            row: reference.reply(row.prompt, row.max_tokens)
            for case in self.cases.values()
            for batch in case.batches
            for row in batch
        }
        del reference  # the engine thread runs every later MLX call
        self.synthetic = SyntheticDrafter(vocab_size=TINY_VOCAB, seed=0)
        for row, reply in self.expected.items():
            if row.method == SYNTHETIC:
                self.synthetic.expect(row.prompt, reply, row.acceptance)
        self.loop = asyncio.new_event_loop()
        self.engine: Engine | None = None
        self.info: Any = None  # the model as the engine loaded it (its notes)

    def close(self) -> None:
        if self.engine is not None:
            self.loop.run_until_complete(self.engine.stop())
            self.engine = None
        self.loop.close()

    def run(self, name: str) -> CaseOutcome:
        """Run one case on this folder's engine (started, or restarted, as needed)."""
        outcome = CaseOutcome(self.arch, self.variant, name)
        start = time.perf_counter()
        try:
            engine = self._started()
            self._run(self._case(engine, self.cases[name], outcome))
        except Exception as exc:  # noqa: BLE001 - a hang or a crash is this case's failure
            outcome.problems.append(f"the case did not complete: {type(exc).__name__}: {exc}")
        outcome.seconds = time.perf_counter() - start
        return outcome

    # -- internals -----------------------------------------------------------------------------

    def _run(self, coro: Coroutine) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coro, CASE_TIMEOUT_S))

    def _started(self) -> Engine:
        if self.engine is None or not self.engine.running:
            config = EngineConfig(
                model=str(self.folder),
                prefill_chunk=PREFILL_CHUNK,
                prompt_cache_disk_bytes=0,  # the prompt cache in RAM only
                log_blas=False,
                extra_drafters=self.synthetic.entry(),
            )
            self.engine = Engine(config)
            self.info = self._run(self._start(self.engine))
        return self.engine

    @staticmethod
    async def _start(engine: Engine) -> Any:
        engine.start()
        return await engine.wait_ready()

    async def _case(self, engine: Engine, case: Case, out: CaseOutcome) -> None:
        self._draft = str(self.folder) if case.draft_model else None  # drafts for itself
        for batch in case.batches:
            results = await self._batch(engine, batch)
            out.rows += results
        refused = self.info.prompt_cache_note if self.info is not None else None
        cached = out.rows[-1].cached_tokens
        if case.cached_tokens is not None and cached != case.cached_tokens:
            if refused and cached == 0:
                out.notes.append(refused)  # the model said why it uses no prompt cache
            else:
                out.problems.append(
                    f"next turn: {cached} cached tokens, "
                    f"expected {case.cached_tokens} (the first turn's prompt and reply)"
                )

    async def _batch(self, engine: Engine, rows: tuple[Row, ...]) -> list[RowResult]:
        """Submit `rows` while the engine thread waits, so one step admits them all; judge
        each against its reference when all have ended."""
        gate = threading.Event()
        held = asyncio.ensure_future(engine.run_on_engine_thread(lambda: gate.wait(10)))
        await asyncio.sleep(0)  # the wait is queued before the requests
        streams = [self._submit(engine, row) for row in rows]
        gate.set()
        await held
        await asyncio.gather(*(s.task for s in streams))
        return [self._judge(s) for s in streams]

    def _submit(self, engine: Engine, row: Row) -> _Stream:
        spec = SpeculativeParams()
        if row.method != OFF:
            draft = self._draft if row.method in ("draft", "auto") else None
            spec = SpeculativeParams(
                method=row.method, draft_tokens=row.k, ngram_max=NGRAM_MAX, draft_model=draft
            )
        request = GenerationRequest(
            prompt_tokens=list(row.prompt), max_tokens=row.max_tokens, speculative=spec
        )
        stream = _Stream(row, [])
        stream.task = asyncio.ensure_future(self._drain(engine.submit(request), stream))
        return stream

    @staticmethod
    async def _drain(events: Any, stream: _Stream) -> None:
        async for event in events:
            if isinstance(event, TokenEvent):
                stream.tokens += event.token_ids
            elif isinstance(event, FinishedEvent | ErrorEvent):
                stream.end = event

    def _judge(self, s: _Stream) -> RowResult:
        result = RowResult(s.row.label, s.row.method.value, self.expected[s.row], list(s.tokens))
        end = s.end
        stats = end.stats if end is not None else None
        judge(
            result,
            finished=isinstance(end, FinishedEvent),
            note=stats.speculation_note if stats else None,
            error=end.message if isinstance(end, ErrorEvent) else None,
            names=self.names,
        )
        result.cached_tokens = stats.cached_tokens if stats else 0
        return result
