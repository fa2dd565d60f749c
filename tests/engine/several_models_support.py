"""Shared pieces of the several-models tests: an engine run with any configured model, draft
settings naming a draft model, and event streams with their arrival times."""

from __future__ import annotations

import asyncio
import time

from engine.api import Engine, EngineConfig
from engine.requests import SpecMethod, SpeculativeParams, TokenEvent
from tests.engine.engine_harness import SYNTH, TIMEOUT_S

LOOKUP = SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=3)


def run(body, *, model, events=None, **config):
    """`body(engine)` on a started engine (configured model `model`), stopped afterwards."""

    async def main():
        config.setdefault("extra_drafters", SYNTH.entry())
        spec = None if model is None else str(model)
        eng = Engine(EngineConfig(model=spec, log_blas=False, **config))
        if events is not None:
            eng.add_listener(events.append)
        eng.start()
        try:
            await asyncio.wait_for(eng.wait_ready(), TIMEOUT_S)
            return await asyncio.wait_for(body(eng), TIMEOUT_S)
        finally:
            await eng.stop()

    return asyncio.run(main())


def draft(path, k=3) -> SpeculativeParams:
    return SpeculativeParams(method=SpecMethod.DRAFT_MODEL, draft_tokens=k, draft_model=str(path))


async def timed(eng, request) -> list[tuple[float, object]]:
    """Every event of a request with the time it arrived."""
    return [(time.monotonic(), e) async for e in eng.submit(request)]


def tokens_of(events) -> list[int]:
    return [t for _, e in events if isinstance(e, TokenEvent) for t in e.token_ids]


def end_of(events):
    return events[-1][1]
