"""Several models at once through the public Engine API: two tiny models serve four chats
together, every row exact; one chat switches its model or draft while another generates,
untouched; the memory budget unloads the least recently used idle model or refuses with the
numbers; unloading gives the memory back; a busy model never starves a quiet one."""

from __future__ import annotations

import asyncio
import gc
import threading

import mlx.core as mx
import pytest

from engine.api import ModelBusy, ModelTooLarge
from engine.engine_reports import ModelUnloadedEvent
from engine.hosting.fair_share import FairShare
from engine.hosting.model_loader import LoadJob
from engine.requests import (
    FinishedEvent,
    GenerationRequest,
    ModelLoadingEvent,
    SpeculativeParams,
    TokenEvent,
)
from engine.validation import refusal
from tests.engine.engine_harness import (
    P_A,
    P_B,
    P_C,
    TinyModel,
    collect,
    make_prompt,
    synthetic,
)
from tests.engine.several_models_support import draft, end_of, run, timed, tokens_of
from tests.tiny_models import make_tiny_llama_dir

N = 24  # tokens per reply
LONG = 240  # a reply that goes on while another chat switches models twice
WEIGHTS = 25_462_016  # bytes of one tiny model's weights (vocab 49152 x hidden 64, untied)


def _tiny(folder, seed: int) -> TinyModel:
    from mlx_lm import load as mlx_load

    path = make_tiny_llama_dir(folder, seed=seed, tie_word_embeddings=False)
    model, tokenizer = mlx_load(str(path))
    return TinyModel(path, model, tokenizer)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, TinyModel]:
    """Four tiny random llamas with the same tokenizer and different weights."""
    root = tmp_path_factory.mktemp("models")
    return {name: _tiny(root / name, seed) for seed, name in enumerate("abcd", start=10)}


# -- two models, four chats ------------------------------------------------------------------


def test_two_models_serve_four_chats_at_once_every_row_exact(models):
    a, b = models["a"], models["b"]
    p_d = make_prompt(4, 18)

    async def body(eng):
        requests = [
            GenerationRequest(prompt_tokens=P_A, max_tokens=N),  # a, plain
            GenerationRequest(prompt_tokens=P_B, max_tokens=N, speculative=draft(b.path)),
            GenerationRequest(prompt_tokens=P_C, max_tokens=N, model=str(b.path)),
            GenerationRequest(
                prompt_tokens=p_d,
                max_tokens=N,
                model=str(b.path),
                speculative=synthetic(p_d, b.greedy(p_d, N), 0.7, 4),
            ),
        ]
        outcomes = await asyncio.gather(*(timed(eng, r) for r in requests))
        return outcomes, eng.stats()

    (on_a, drafted, on_b, synth), stats = run(body, model=a.path)
    assert tokens_of(on_a) == a.greedy(P_A, N)
    assert tokens_of(drafted) == a.greedy(P_B, N)  # b drafts for a: a's tokens all the same
    assert tokens_of(on_b) == b.greedy(P_C, N)
    assert tokens_of(synth) == b.greedy(p_d, N)
    assert end_of(drafted).stats.spec.rounds > 0 and end_of(synth).stats.spec.rounds > 0
    # they streamed together: b's rows had tokens before a's rows ended, and the other way
    first_b = min(t for t, e in on_b + synth if isinstance(e, TokenEvent))
    first_a = min(t for t, e in on_a + drafted if isinstance(e, TokenEvent))
    assert first_b < max(on_a[-1][0], drafted[-1][0])
    assert first_a < max(on_b[-1][0], synth[-1][0])
    assert any(isinstance(e, ModelLoadingEvent) for _, e in on_b)  # b loaded on first use
    by_name = {m.name: m for m in stats.models}
    assert set(by_name) == {"a", "b"} and by_name["a"].configured
    assert by_name["b"].generated_tokens == 2 * N and by_name["a"].generated_tokens == 2 * N
    assert stats.generated_tokens == 4 * N


# -- switching one chat's model or draft while another generates -----------------------------


def test_switching_a_chats_model_or_draft_leaves_the_other_chat_untouched(models, monkeypatch):
    """Chat 1 generates on a; chat 2 sends on c (not loaded), then on a with draft d (not
    loaded). While each load is held back, a new request on a is admitted and finishes; chat 1
    finishes exact, never cancelled."""
    a, c, d = models["a"], models["c"], models["d"]
    gate = threading.Event()
    gate.set()  # the configured model loads as usual
    real_advance = LoadJob.advance

    done: dict[int, object] = {}

    def held(self, slice_s, progress):  # a load that cannot finish until the gate opens
        if done.get(id(self)) is None:
            done[id(self)] = real_advance(self, slice_s, progress)
        return done.pop(id(self)) if gate.is_set() else None

    monkeypatch.setattr(LoadJob, "advance", held)
    long_prompt = make_prompt(7, 30)

    async def body(eng):
        chat1 = asyncio.ensure_future(
            timed(eng, GenerationRequest(prompt_tokens=long_prompt, max_tokens=LONG))
        )
        meanwhile = []
        switched = []
        for request in (
            GenerationRequest(prompt_tokens=P_B, max_tokens=N, model=str(c.path)),
            GenerationRequest(prompt_tokens=P_C, max_tokens=N, speculative=draft(d.path)),
        ):
            gate.clear()
            chat2 = asyncio.ensure_future(timed(eng, request))
            await asyncio.sleep(0.05)
            meanwhile.append(await collect(eng, GenerationRequest(prompt_tokens=P_A, max_tokens=4)))
            assert not chat2.done() and not chat1.done()  # the load is held, chat 1 runs on
            gate.set()
            switched.append(await chat2)
        return await chat1, meanwhile, switched

    chat1, meanwhile, (on_c, with_d) = run(body, model=a.path)
    assert tokens_of(chat1) == a.greedy(long_prompt, LONG)
    assert (
        isinstance(end_of(chat1), FinishedEvent) and end_of(chat1).finish_reason.value == "length"
    )
    for outcome in meanwhile:
        assert outcome.finished.token_ids == a.greedy(P_A, 4)
    assert tokens_of(on_c) == c.greedy(P_B, N)
    assert tokens_of(with_d) == a.greedy(P_C, N)
    assert end_of(with_d).stats.spec.rounds > 0  # drafted with d from this reply on
    loading = [e for _, e in on_c if isinstance(e, ModelLoadingEvent)]
    assert loading and loading[0].model == "c" and 0 <= loading[-1].fraction <= 1
    assert end_of(on_c).stats.ttft_s >= 0.05  # its wait for the held load counts


# -- the memory budget ------------------------------------------------------------------------


def test_a_model_that_does_not_fit_unloads_the_least_recently_used_idle_one(models):
    a, b, c = models["a"], models["b"], models["c"]
    events: list = []

    async def body(eng):
        await eng.load_model(str(b.path))
        await collect(eng, GenerationRequest(prompt_tokens=P_A, max_tokens=4))  # a: used last
        third = await collect(
            eng, GenerationRequest(prompt_tokens=P_B, max_tokens=N, model=str(c.path))
        )
        after_c = {m.name for m in eng.stats().models}
        await eng.pin_model(str(c.path))
        back = await collect(
            eng, GenerationRequest(prompt_tokens=P_C, max_tokens=N, model=str(b.path))
        )
        return third, after_c, back, {m.name for m in eng.stats().models}

    third, after_c, back, after_b = run(
        body, model=a.path, events=events, memory_budget_bytes=int(2.5 * WEIGHTS)
    )
    assert third.finished.token_ids == c.greedy(P_B, N)
    assert after_c == {"a", "c"}  # b was the least recently used idle model
    assert back.finished.token_ids == b.greedy(P_C, N)
    assert after_b == {"b", "c"}  # c is pinned: a went
    unloaded = [e for e in events if isinstance(e, ModelUnloadedEvent)]
    assert [(e.model.name, e.reason) for e in unloaded] == [
        ("b", "made room for c"),
        ("a", "made room for b"),
    ]


def test_a_model_that_cannot_fit_while_the_others_are_busy_is_refused_with_the_numbers(models):
    a, b, c = models["a"], models["b"], models["c"]

    async def body(eng):
        await eng.load_model(str(b.path))
        busy = [
            asyncio.ensure_future(
                collect(eng, GenerationRequest(prompt_tokens=P_A, max_tokens=3 * N, model=m))
            )
            for m in (None, str(b.path))
        ]
        await asyncio.sleep(0.05)
        refused = await collect(
            eng, GenerationRequest(prompt_tokens=P_B, max_tokens=N, model=str(c.path))
        )
        return refused, await asyncio.gather(*busy), eng.stats()

    budget = int(2.5 * WEIGHTS)
    refused, (on_a, on_b), stats = run(body, model=a.path, memory_budget_bytes=budget)
    message = refused.error.message
    assert "c needs 24.3 MB of memory and the memory budget is 60.7 MB" in message
    for name in "ab":
        assert f"{name} (24." in message and "in use)" in message
    assert on_a.finished.token_ids == a.greedy(P_A, 3 * N)  # the busy ones never noticed
    assert on_b.finished.token_ids == b.greedy(P_A, 3 * N)
    assert {m.name for m in stats.models} == {"a", "b"}
    assert stats.memory_budget_bytes == budget and stats.memory_used_bytes <= budget


def test_a_model_larger_than_the_whole_budget_is_refused(models, tmp_path):
    a = models["a"]
    big = make_tiny_llama_dir(tmp_path / "big", hidden_size=128, tie_word_embeddings=False)

    async def body(eng):
        with pytest.raises(ModelTooLarge) as refused:
            await eng.load_model(str(big))
        return str(refused.value), [m.name for m in eng.stats().models]

    message, names = run(body, model=a.path, memory_budget_bytes=int(1.5 * WEIGHTS))
    assert message.startswith("big needs 49.1 MB")  # its weights, from the files' headers
    assert message.endswith("more than the whole memory budget of 36.4 MB")
    assert names == ["a"]  # nothing was unloaded for it


# -- unloading -------------------------------------------------------------------------------


@pytest.fixture(params=["gc on", "gc off"])
def automatic_gc(request):
    """Both ways a host runs Python's collector: CPython's trigger, or (the app) off, with
    collection on the GUI thread only: then unloading cannot rely on a collection."""
    was = gc.isenabled()
    if request.param == "gc off":
        gc.disable()
    yield request.param
    if was:
        gc.enable()


def test_unloading_frees_the_models_memory(models, automatic_gc):
    a, b = models["a"], models["b"]

    def settled() -> int:  # earlier tests' engines may still wait for the garbage collector
        gc.collect()
        mx.clear_cache()
        return mx.get_active_memory()

    async def body(eng):
        base = await eng.run_on_engine_thread(settled)
        await eng.load_model(str(b.path), pin=True)
        reply = await collect(
            eng, GenerationRequest(prompt_tokens=P_A, max_tokens=N, model=str(b.path))
        )
        loaded = await eng.run_on_engine_thread(settled)
        busy = asyncio.ensure_future(
            collect(eng, GenerationRequest(prompt_tokens=P_B, max_tokens=2 * N, model=str(b.path)))
        )
        await asyncio.sleep(0.05)
        with pytest.raises(ModelBusy, match="b is in use"):
            await eng.unload_model(str(b.path))
        await busy
        info = await eng.unload_model(str(b.path))  # pinned: by hand it still goes
        freed = await eng.run_on_engine_thread(mx.get_active_memory)
        return base, reply, loaded, info, freed, eng.stats()

    base, reply, loaded, info, freed, stats = run(body, model=a.path, prompt_cache=False)
    assert reply.finished.token_ids == b.greedy(P_A, N)
    assert info.name == "b" and loaded - base >= WEIGHTS
    assert freed <= base + WEIGHTS // 100  # back where it was before b
    assert [m.name for m in stats.models] == ["a"]


def test_count_tokens_of_a_model_that_is_not_loaded_loads_no_weights(models):
    a, b = models["a"], models["b"]
    messages = [{"role": "user", "content": "How many tokens is this?"}]

    async def body(eng):
        unloaded = await eng.count_tokens(messages, model=str(b.path))
        return unloaded, await eng.count_tokens(messages), [m.name for m in eng.stats().models]

    unloaded, loaded, names = run(body, model=a.path)
    assert unloaded == loaded > 5 and names == ["a"]


# -- fairness --------------------------------------------------------------------------------


def test_a_busy_model_does_not_starve_a_quiet_one(models, monkeypatch):
    """Eight long-prompt rows on a, then one row on b: while b has work, the MLX thread never
    gives a more than two turns in a row (a prompt chunk or a decode step each), so b's row
    ends before a's last row, every row exact."""
    a, b = models["a"], models["b"]
    prompts = [make_prompt(20 + i, 250) for i in range(8)]
    turns: list[str] = []
    real_charge = FairShare.charge

    def recorded(self, key, tokens_per_row):
        turns.append(key)
        real_charge(self, key, tokens_per_row)

    monkeypatch.setattr(FairShare, "charge", recorded)

    async def body(eng):
        await eng.load_model(str(b.path))
        busy = [
            asyncio.ensure_future(timed(eng, GenerationRequest(prompt_tokens=p, max_tokens=N)))
            for p in prompts
        ]
        await asyncio.sleep(0.05)  # a's rows are queued first
        quiet = await timed(
            eng, GenerationRequest(prompt_tokens=P_C, max_tokens=N, model=str(b.path))
        )
        return quiet, await asyncio.gather(*busy)

    quiet, busy = run(body, model=a.path, prefill_chunk=64, prompt_cache=False)
    assert tokens_of(quiet) == b.greedy(P_C, N)
    for prompt, events in zip(prompts, busy):
        assert tokens_of(events) == a.greedy(prompt, N)
    assert quiet[-1][0] < max(events[-1][0] for events in busy)
    keys = {str(a.path.resolve()): "a", str(b.path.resolve()): "b"}
    order = "".join(keys[k] for k in turns)
    while_b = order[order.index("b") : order.rindex("b") + 1]
    assert "aaa" not in while_b and while_b.count("b") >= N  # turn for turn, not a's backlog first
    assert order.count("a") > while_b.count("a")  # a had work beyond b's


def test_fair_share_steps_the_model_owed_the_most_tokens():
    share = FairShare()
    picks = []
    for _ in range(6):
        key = share.pick(["a", "b"])
        picks.append(key)
        share.charge(key, 3.0 if key == "a" else 1.0)  # a speculates: 3 tokens per row
    assert picks == ["a", "b", "b", "b", "a", "b"]
    for _ in range(20):  # b alone for a while: a cannot bank turns meanwhile
        share.charge(share.pick(["b"]), 1.0)
    assert share.pick(["a", "b"]) == "a" and share.served["a"] >= share.served["b"] - 3
    share.charge("a", 0.0)  # a prompt-processing step costs a turn too
    assert share.served["a"] == share.served["b"] + 1


# -- request fields --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "request_,words",
    [
        (GenerationRequest(prompt_tokens=[5], model=7), ["model must be a string", "7"]),
        (GenerationRequest(prompt_tokens=[5], model="  "), ["model must name a model"]),
        (
            GenerationRequest(prompt_tokens=[5], speculative=SpeculativeParams(draft_model=["x"])),
            ["speculative.draft_model must be a string"],
        ),
    ],
)
def test_model_fields_are_checked_at_submit(request_, words):
    refused = refusal(request_)
    assert refused is not None
    for word in words:
        assert word in refused.message
