"""MTP drafting from the checkpoint (engine/speculative/mtp/): a tiny random model of each MTP
family (Qwen3-Next and Qwen3.5 hybrids, DeepSeek-V3 with MLA and experts, GLM-4.5, MiMo) with
random MTP weights in that family's checkpoint layout, in the folder or in a separate file the
engine is pointed at. At temperature 0 every row of a mixed batch (MTP rows with their own k,
lookup, auto and plain rows, a late join) gives exactly mlx_lm.generate's tokens; a next turn
served by the prompt cache too. A model without MTP layers refuses "mtp" with the reason.
Random MTP weights are almost never accepted: these tests show exactness, not speed."""

from __future__ import annotations

import asyncio
import random

import pytest
from mlx_lm import load as mlx_load
from mlx_lm.generate import stream_generate

from engine.requests import GenerationRequest, SpecMethod, SpeculativeParams
from tests.engine.engine_harness import collect, with_engine
from tests.mtp_models import MTP_FAMILIES, make_mtp_folder

N = 16
SEPARATE = ("qwen3_next", "deepseek_v3")  # their MTP weights in a file of their own


def prompts(seed: int, n: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(20, 1000) for _ in range(rng.randint(4, 30))] for _ in range(n)]


def greedy(path, prompt_list, max_tokens=N) -> list[list[int]]:
    model, tokenizer = mlx_load(str(path))
    return [
        [
            r.token
            for r in stream_generate(model, tokenizer, p, max_tokens=max_tokens)
            if not (r.finish_reason == "stop" and r.token in tokenizer.eos_token_ids)
        ]
        for p in prompt_list
    ]


@pytest.fixture(scope="module", params=MTP_FAMILIES)
def family(request, tmp_path_factory):
    name = request.param
    root = tmp_path_factory.mktemp(name)
    separate = root / "mtp-weights.safetensors" if name in SEPARATE else None
    path = make_mtp_folder(name, root / "model", separate=separate)
    config = {"mtp_weights": ((str(path), str(separate)),)} if separate else {}
    return name, path, config


def test_mixed_batch_with_mtp_rows_equals_generate(family):
    name, path, config = family
    ps = prompts(11, 5)
    expected = greedy(path, ps)
    specs = [
        SpeculativeParams(method=SpecMethod.MTP, draft_tokens=3),
        SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=2),
        SpeculativeParams(),
        SpeculativeParams(method=SpecMethod.AUTO),
        SpeculativeParams(method=SpecMethod.MTP, draft_tokens=1),
    ]

    async def body(eng):
        info = await eng.load_model(None)
        assert info.mtp, info.mtp_note

        async def one(i):
            await asyncio.sleep(0.3 if i == 4 else 0.0)  # the last joins a running batch
            request = GenerationRequest(prompt_tokens=ps[i], max_tokens=N, speculative=specs[i])
            return await collect(eng, request)

        return await asyncio.gather(*(one(i) for i in range(len(ps))))

    outcomes = with_engine(path, body, prefill_chunk=8, prompt_cache=False, **config)
    assert [o.tokens for o in outcomes] == expected
    for i in (0, 4):
        assert outcomes[i].finished.stats.spec.rounds > 0, f"{name}: the MTP row never drafted"


def test_mtp_next_turn_from_the_prompt_cache_equals_generate(family, tmp_path):
    _, path, config = family
    first = prompts(21, 1)[0]
    reply = greedy(path, [first])[0]
    second = first + reply + [42, 43, 44]
    expected = greedy(path, [second])[0]
    spec = SpeculativeParams(method=SpecMethod.MTP, draft_tokens=2)

    async def body(eng):
        await collect(eng, GenerationRequest(prompt_tokens=first, max_tokens=N, speculative=spec))
        return await collect(
            eng, GenerationRequest(prompt_tokens=second, max_tokens=N, speculative=spec)
        )

    out = with_engine(path, body, prompt_cache=True, prompt_cache_dir=str(tmp_path), **config)
    assert out.tokens == expected
    assert out.finished.stats.cached_tokens > 0


def test_a_model_without_mtp_layers_refuses_mtp(tiny):
    async def body(eng):
        info = await eng.load_model(None)
        assert not info.mtp
        request = GenerationRequest(
            prompt_tokens=[5, 6, 7], speculative=SpeculativeParams(method=SpecMethod.MTP)
        )
        return await collect(eng, request)

    out = with_engine(tiny.path, body, prompt_cache=False)
    assert "has no MTP layers" in out.error.message


def test_drafter_rounds_match_a_fresh_forward_over_the_whole_history(tmp_path):
    """Its batched cache, fed a round at a time with chained guesses given back, drafts for
    every row what one MTP forward over that row's handed history (no cache) drafts, round
    after round: rows with their own k, a row that sits out rounds, a row whose handover
    jumps ahead (a prompt-cache hit) and starts again there."""
    import mlx.core as mx
    from mlx_lm.models.cache import KVCache

    from engine.hidden import attach, embedding, lm_head, split_forward
    from engine.models import load_model
    from engine.speculative.drafter import DraftRow
    from engine.speculative.mtp.loading import mtp_drafter_for

    path = make_mtp_folder("qwen3_5", tmp_path / "m")
    target = load_model(str(path))
    assert attach(target.model) is None
    drafter, note = mtp_drafter_for(target)
    assert note is None
    embed, head = embedding(target.model), lm_head(target.model)

    def fresh(history: list[int], k: int, start: int) -> list[int]:
        hidden, _ = split_forward(target.model, mx.array([history[:-1]]), None)
        cache = KVCache()
        tokens = mx.array([history[start + 1 :]])
        out, chain = drafter.mtp(embed(tokens), hidden[:, start:], cache)
        token = mx.argmax(head(out[:, -1]), axis=-1)
        drafts = [token]
        for _ in range(k - 1):
            out, chain = drafter.mtp(embed(token[None]), chain[:, -1:], cache)
            token = mx.argmax(head(out[:, -1]), axis=-1)
            drafts.append(token)
        return mx.concatenate(drafts).tolist()

    params = SpeculativeParams(method=SpecMethod.MTP)
    rng = random.Random(3)
    histories = dict(zip("abc", prompts(5, 3)))
    handed = dict.fromkeys("abc", 0)
    starts = dict.fromkeys("abc", 0)
    plan = [("abc", 3), ("ab", 2), ("abc", 4), ("ac", 1), ("abc", 3), ("bc", 2)]
    for round_no, (asked, k) in enumerate(plan):
        if round_no == 4:  # c's handover jumps ahead: its positions before were not run
            histories["c"] = histories["c"] + [rng.randrange(20, 1000) for _ in range(5)]
            handed["c"] = starts["c"] = len(histories["c"]) - 3
        rows = []
        for rid in asked:
            history = histories[rid]
            hidden, _ = split_forward(target.model, mx.array([history[:-1]]), None)
            rows.append(
                DraftRow(
                    rid,
                    history[:4],
                    history[4:],
                    k + (rid == "b"),
                    params,
                    hidden=hidden[0, handed[rid] :],
                    hidden_start=handed[rid],
                )
            )
        got = drafter.propose(rows)
        for row, draft in zip(rows, got):
            rid = row.request_id
            assert draft == fresh(histories[rid], row.k, starts[rid]), (round_no, rid)
            handed[rid] = len(histories[rid]) - 1
            kept = draft[: rng.randint(0, row.k)]
            histories[rid] = histories[rid] + kept + [rng.randrange(20, 1000)]
