"""The engine's life cycle through its public API: a dead MLX thread ends every stream and can be
started again; token counting and continued replies for the app."""

from __future__ import annotations

import asyncio

import pytest

from engine.api import Engine, EngineConfig, EngineNotStarted
from engine.engine_reports import EngineErrorEvent
from engine.requests import FinishReason, GenerationRequest
from tests.engine.engine_harness import P_A, P_B, TIMEOUT_S, collect, wait_until


def test_a_dead_engine_thread_ends_every_stream_and_restarts(tiny):
    async def main():
        eng = Engine(EngineConfig(model=str(tiny.path), log_blas=False))
        events: list = []
        eng.add_listener(events.append)
        eng.start()
        await asyncio.wait_for(eng.wait_ready(), TIMEOUT_S)

        def kill() -> None:  # a BaseException escapes every handler of the step
            raise SystemExit("injected: the MLX thread is killed")

        eng._worker.core_for().step = kill
        streams = [
            asyncio.ensure_future(collect(eng, GenerationRequest(prompt_tokens=p, max_tokens=8)))
            for p in (P_A, P_B)
        ]
        outcomes = await asyncio.wait_for(asyncio.gather(*streams), TIMEOUT_S)
        for outcome in outcomes:
            assert "the engine stopped" in outcome.error.message
        assert await wait_until(lambda: not eng.running)
        fatal = [e for e in events if isinstance(e, EngineErrorEvent) and e.fatal]
        assert fatal and "injected" in fatal[0].message
        with pytest.raises(EngineNotStarted):  # calls say so instead of waiting forever
            await asyncio.wait_for(eng.count_tokens([{"role": "user", "content": "x"}]), 5)
        eng.start()  # a fresh thread, a fresh model load
        await asyncio.wait_for(eng.wait_ready(), TIMEOUT_S)
        again = await collect(eng, GenerationRequest(prompt_tokens=P_A, max_tokens=8))
        assert again.finished.token_ids == tiny.greedy(P_A, 8)
        await eng.stop()

    asyncio.run(main())


@pytest.mark.slow
def test_count_tokens_and_continue_reply_extend_the_same_turn():
    """With the real chat template: a continued reply's prompt is the earlier prompt plus the
    reply so far, without an end of turn, and count_tokens agrees with the prompt's length."""
    messages = [{"role": "user", "content": "Name three colours."}]

    async def main():
        eng = Engine(EngineConfig(model=None, log_blas=False, prompt_cache=False))
        eng.start()
        try:
            await asyncio.wait_for(eng.wait_ready(), TIMEOUT_S)
            first = await eng.generate(GenerationRequest(messages=messages, max_tokens=6))
            assert first.finish_reason is FinishReason.LENGTH
            n_first = await eng.count_tokens(messages)
            assert n_first == first.stats.prompt_tokens
            partial = messages + [{"role": "assistant", "content": first.text}]
            n_cont = await eng.count_tokens(partial, continue_reply=True)
            assert n_first < n_cont <= n_first + len(first.token_ids) + 2
            more = await eng.generate(
                GenerationRequest(messages=partial, max_tokens=6, continue_reply=True)
            )
            assert more.stats.prompt_tokens == n_cont
            whole = await eng.generate(GenerationRequest(messages=messages, max_tokens=12))
            # greedy: continuing the cut reply gives what one longer reply would have given
            assert (first.text + more.text).strip() == whole.text.strip()
        finally:
            await eng.stop()

    asyncio.run(main())
