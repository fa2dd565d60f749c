"""Every field of a request is checked for its type and range at submit: a bad request ends
with one ErrorEvent naming the field and never reaches the batch, so three good requests
running next to it finish with mlx_lm.generate's tokens; prompt lookup's cost per round stays
bounded at the largest n-gram a request may set."""

from __future__ import annotations

import asyncio
import math
import re
import threading
import time

import pytest

from engine.prompt import build_prompt
from engine.requests import (
    MAX_DRAFT_TOKENS,
    MAX_NGRAM,
    ErrorEvent,
    GenerationRequest,
    SpeculativeParams,
    TokenEvent,
)
from engine.sampling import validate_sampling
from engine.speculative.policy import SpeculationPolicy
from engine.speculative.prompt_lookup import DEFAULT_SEARCH_WINDOW, lookup
from engine.validation import RequestError, check_speculative, validate_request
from tests.engine.engine_harness import P_A, P_B, P_C, VOCAB, collect, drain, with_engine
from tests.engine.request_cases import BAD, BAD_FOR_THE_MODEL, GOOD, LOOKUP, request, sampling


def _ids(table):
    return [row[0] for row in table]


@pytest.mark.parametrize(("name", "bad", "message"), BAD, ids=_ids(BAD))
def test_each_bad_field_is_refused_with_its_name(name, bad, message):
    with pytest.raises(RequestError) as info:
        validate_request(bad)
    assert str(info.value).startswith(message), str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(("name", "good"), GOOD, ids=_ids(GOOD))
def test_good_requests_in_every_accepted_form_pass(name, good):
    validate_request(good)


def _admit(bad: GenerationRequest) -> None:
    """The checks the scheduler runs on the engine thread when it admits a request."""
    if bad.messages is not None or bad.prompt_tokens is not None:
        build_prompt(bad, None, vocab_size=VOCAB)
    validate_sampling(bad.sampling, VOCAB)
    check_speculative(bad.speculative)
    SpeculationPolicy(drafters=frozenset({"lookup"})).check(bad.speculative)


ADMITTED = [
    row
    for row in BAD
    if isinstance(row[1], GenerationRequest)
    and row[2].startswith(("sampling.", "speculative.", "messages", "prompt_tokens", "give"))
]


@pytest.mark.parametrize(("name", "bad", "message"), ADMITTED, ids=_ids(ADMITTED))
def test_admission_refuses_the_same_fields(name, bad, message):
    """The engine thread's checks at admission call the same code, so a request that did not
    come through `Engine.submit` is refused alike."""
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        _admit(bad)


# -- through the public Engine, next to three good requests ----------------------------------


def _good_neighbours() -> list[GenerationRequest]:
    return [
        GenerationRequest(prompt_tokens=P_A, max_tokens=10),
        GenerationRequest(
            prompt_tokens=P_B,
            max_tokens=12,
            speculative=SpeculativeParams(method=LOOKUP, ngram_max=MAX_NGRAM, draft_tokens=3),
        ),
        GenerationRequest(
            prompt_tokens=P_C, max_tokens=8, speculative=SpeculativeParams(method="auto")
        ),
    ]


async def _until_first_token(stream) -> list:
    """Events up to and including the stream's first TokenEvent: the row is in the batch."""
    events = []
    async for event in stream:
        events.append(event)
        if isinstance(event, TokenEvent):
            break
    return events


async def _replay(events: list, stream):
    for event in events:
        yield event
    async for event in stream:
        yield event


ALL_BAD = BAD + BAD_FOR_THE_MODEL


def test_bad_requests_end_alone_while_three_good_ones_finish_exactly(tiny):
    async def body(eng):
        results = {}
        for name, bad, _ in ALL_BAD:
            streams = [eng.submit(r) for r in _good_neighbours()]
            begun = await asyncio.gather(*(_until_first_token(s) for s in streams))
            refused = await collect(eng, bad)  # arrives while the good rows decode
            good = await asyncio.gather(*(drain(_replay(b, s)) for b, s in zip(begun, streams)))
            results[name] = (refused, good)
        generated = await eng.generate(request(prompt_tokens=P_A, max_tokens=3))
        with pytest.raises(RuntimeError, match=r"^sampling\.seed must be an integer, got 1\.5"):
            await eng.generate(sampling(seed=1.5))
        return results, generated, eng.stats()

    results, generated, stats = with_engine(tiny.path, body)
    expected = [tiny.greedy(P_A, 10), tiny.greedy(P_B, 12), tiny.greedy(P_C, 8)]
    for name, bad, message in ALL_BAD:
        refused, good = results[name]
        assert refused.tokens == [] and isinstance(refused.end, ErrorEvent), name
        if isinstance(bad, GenerationRequest) and isinstance(bad.request_id, str):
            assert refused.error.request_id == bad.request_id
        assert refused.error.message.startswith(message), (name, refused.error.message)
        assert [g.finished.token_ids for g in good] == expected, name
    assert generated.token_ids == tiny.greedy(P_A, 3)
    assert stats.status == "ready" and stats.running == 0 and stats.waiting == 0


async def _events(stream) -> list:
    return [event async for event in stream]


def test_a_bad_request_is_refused_while_the_engine_thread_is_busy(tiny):
    async def body(eng):
        release = threading.Event()
        busy = asyncio.ensure_future(eng.run_on_engine_thread(lambda: release.wait(30)))
        try:
            refused = eng.submit(sampling(seed=1.5))
            # the engine thread cannot answer before `release`: the refusal comes from submit
            return await asyncio.wait_for(_events(refused), 5.0)
        finally:
            release.set()
            await busy

    events = with_engine(tiny.path, body)
    assert len(events) == 1 and isinstance(events[0], ErrorEvent)
    assert events[0].message == "sampling.seed must be an integer, got 1.5"


# -- prompt lookup's cost per round ----------------------------------------------------------


def _lookup_seconds(history: list[int], repeats: int = 7) -> float:
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        drafted = lookup(
            history,
            MAX_DRAFT_TOKENS,
            ngram_min=1,
            ngram_max=MAX_NGRAM,
            window=DEFAULT_SEARCH_WINDOW,
        )
        best = min(best, time.perf_counter() - start)
    assert drafted == []  # the worst case: every n is tried against every position
    return best


def test_lookup_at_the_largest_ngram_costs_the_same_on_a_100k_token_history():
    # Runs of one token ending in a token seen nowhere else: each n-gram's first token
    # matches almost everywhere and the whole n-gram nowhere.
    short = [7] * (DEFAULT_SEARCH_WINDOW - 1) + [8]
    long = [7] * (100_000 - 1) + [8]
    ratio = _lookup_seconds(long) / _lookup_seconds(short)
    assert ratio < 3.0, f"a 100k-token history cost {ratio:.1f}x a {len(short)}-token one"
