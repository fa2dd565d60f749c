"""The MLX thread's events reach asyncio in batches (engine/hosting/event_outbox.py): a reply's
first token, its end, errors and progress at once; later tokens and stats at most
`interval_s` late; always in the order they were produced; nothing held while the thread waits."""

from __future__ import annotations

import asyncio
import time

from engine.hosting.event_outbox import EventOutbox
from engine.requests import (
    ErrorEvent,
    FinishedEvent,
    FinishReason,
    GenerationRequest,
    PrefillProgressEvent,
    RequestStats,
    StatsEvent,
    TokenEvent,
)
from tests.engine.engine_harness import P_A, P_B, collect, with_engine


def token(rid: str, t: int) -> TokenEvent:
    return TokenEvent(rid, [t], f"<{t}>", [False])


def make(interval_s: float = 60.0) -> tuple[EventOutbox, list[list]]:
    hops: list[list] = []
    return EventOutbox(hops.append, interval_s=interval_s), hops


def test_a_first_token_goes_at_once_later_ones_wait():
    box, hops = make()
    box.add([token("a", 1)])
    assert hops == [[token("a", 1)]]
    box.add([token("a", 2)])
    box.add([token("a", 3), StatsEvent("a", RequestStats())])
    assert len(hops) == 1  # held
    box.add([token("b", 9)])  # b's first token takes a's with it, in order
    assert len(hops) == 2
    assert [e.token_ids for e in hops[1] if isinstance(e, TokenEvent)] == [[2], [3], [9]]


def test_an_end_or_an_error_delivers_everything_held_in_order():
    box, hops = make()
    box.add([token("a", 1)])
    box.add([token("a", 2)])
    end = FinishedEvent("a", FinishReason.LENGTH, "", [1, 2], RequestStats())
    box.add([end])
    assert hops[-1] == [token("a", 2), end]
    box.add([token("b", 1)])
    box.add([token("b", 2)])
    error = ErrorEvent("b", "boom")
    box.add([error])
    assert hops[-1] == [token("b", 2), error]


def test_a_request_id_used_again_streams_its_first_token_at_once():
    box, hops = make()
    box.add([token("a", 1)])
    box.add([FinishedEvent("a", FinishReason.STOP, "", [1], RequestStats())])
    box.add([token("a", 5)])
    assert hops[-1] == [token("a", 5)]


def test_progress_is_urgent():
    box, hops = make()
    box.add([token("a", 1)])
    box.add([token("a", 2)])
    box.add([PrefillProgressEvent("b", 10, 100)])
    assert len(hops) == 2 and len(hops[1]) == 2


def test_held_tokens_go_after_the_interval():
    box, hops = make(interval_s=0.01)
    box.add([token("a", 1)])
    box.add([token("a", 2)])
    box.flush_due()
    assert len(hops) == 1
    time.sleep(0.02)
    box.flush_due()
    assert hops[-1] == [token("a", 2)]
    box.add([token("a", 3)])
    time.sleep(0.02)
    box.add([token("a", 4)])  # the oldest waited long enough: both go
    assert hops[-1] == [token("a", 3), token("a", 4)]


def test_zero_interval_delivers_every_step():
    box, hops = make(interval_s=0.0)
    for t in range(3):
        box.add([token("a", t)])
    assert len(hops) == 3


def test_an_engine_streams_every_token_in_order_and_holds_nothing_when_idle(tiny):
    """Through the engine: all tokens arrive, and a reply that ends is delivered whole even
    with a long interval (ends are urgent, and the idle thread flushes)."""

    async def body(eng):
        started = time.perf_counter()
        outs = await asyncio.gather(
            collect(eng, GenerationRequest(prompt_tokens=P_A, max_tokens=12)),
            collect(eng, GenerationRequest(prompt_tokens=P_B, max_tokens=7)),
        )
        return outs, time.perf_counter() - started

    (a, b), took = with_engine(tiny.path, body, stream_interval_s=30.0, prompt_cache=False)
    assert a.tokens == tiny.greedy(P_A, 12)
    assert b.tokens == tiny.greedy(P_B, 7)
    assert took < 20.0  # nothing waited for the 30 s interval
