"""KV-cache quantization (kv_bits 4/8, group size, start) with batching, speculation and the
prompt cache, compared with mlx-lm's own quantized-KV generation.

Semantics (engine/cache/kv_quant.py): a cache is quantized once it holds `kv_start` positions,
checked after every forward, as mlx-lm's `maybe_quantize_kv_cache` does; start 0 means "from the
first position" (mlx-lm still runs its first prefill chunk unquantized at start 0; handing
`stream_generate` a list of QuantizedKVCache gives the same thing from mlx-lm). One batch layer
converts for all its rows at once. Where the semantics coincide the tokens must be identical:

- start 0: every row, any chunking, any arrival order, speculation or not, prompt cache or not;
- start S > 0, one request: mlx-lm with the same prefill step size;
- start S > 0, several requests prefilled in one forward: each row converts when the batch does,
  right after its prefill, which is mlx-lm's rule at start 0 with one prefill chunk.

The tiny random models are needed with a head size of 64 (group sizes must divide it). At 4 bits
their greedy tokens differ from the unquantized ones, at 8 bits they do not, so 8-bit is also
checked on logits (test_batched_quantized_logits_match_mlx_lm).
"""

from __future__ import annotations

import asyncio
import random
import time

import mlx.core as mx
import pytest
from mlx_lm import load as mlx_load
from mlx_lm.generate import maybe_quantize_kv_cache, stream_generate
from mlx_lm.models.cache import KVCache, QuantizedKVCache, make_prompt_cache

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine.api import Engine, EngineConfig
from engine.cache import row_groups
from engine.cache.batch_quantized import BatchQuantizedKVCache
from engine.requests import (
    ErrorEvent,
    FinishedEvent,
    GenerationRequest,
    SpecMethod,
    SpeculativeParams,
)
from engine.speculative.rollback import rollback_rows
from tests.engine.engine_harness import SYNTH, synthetic
from tests.tiny_models import make_tiny_gemma3_dir, make_tiny_llama_dir

PREFILL_CHUNK = 16  # small, so prompts span several chunks
N_TOKENS = 20
EPS = 5e-3  # log-probability slack for near-ties where the computation differs (see below)


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return make_tiny_llama_dir(tmp_path_factory.mktemp("llama64"), head_dim=64)


@pytest.fixture(scope="module")
def llama_mlx(llama):
    return mlx_load(str(llama))


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    return make_tiny_gemma3_dir(
        tmp_path_factory.mktemp("gemma64"), sliding_window=8, head_dim=64, query_pre_attn_scalar=64
    )


def make_prompts(n, *, seed, min_len=3, max_len=60):
    rng = random.Random(seed)
    return [
        [rng.randrange(100, 49152) for _ in range(rng.randint(min_len, max_len))] for _ in range(n)
    ]


def repetitive_prompts(n, *, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        part = [rng.randrange(100, 49152) for _ in range(rng.randint(3, 24))]
        out.append(part + part[: rng.randint(1, len(part))])
    return out


def reference(loaded, prompts, *, bits, start, group=64, chunk=PREFILL_CHUNK, n=N_TOKENS):
    """mlx-lm's single-request greedy tokens with a quantized KV cache. start 0: a quantized
    cache from the first position (a list of QuantizedKVCache; sliding-window layers keep their
    RotatingKVCache); else mlx-lm's kv_bits / quantized_kv_start."""
    model, tokenizer = loaded
    out = []
    for prompt in prompts:
        if start == 0:
            cache = [
                QuantizedKVCache(group_size=group, bits=bits) if type(c) is KVCache else c
                for c in make_prompt_cache(model)
            ]
            kw = {"prompt_cache": cache}
        else:
            kw = {"kv_bits": bits, "kv_group_size": group, "quantized_kv_start": start}
        tokens = [
            r.token
            for r in stream_generate(
                model, tokenizer, prompt, max_tokens=n, prefill_step_size=chunk, **kw
            )
            if r.finish_reason != "stop" or r.token not in tokenizer.eos_token_ids
        ]
        out.append(tokens)
    return out


def forced_logprobs(loaded, prompt, tokens, *, bits, start, group=64, chunk=PREFILL_CHUNK):
    """mlx-lm's generate_step with a quantized KV cache (same prefill chunks, the same
    `maybe_quantize_kv_cache` after every forward; start 0: quantized from the first position),
    fed `tokens` instead of its own: the log-probabilities it gives before each of them."""
    model, _ = loaded
    cache = make_prompt_cache(model)
    if start == 0 and bits is not None:
        cache = [QuantizedKVCache(group, bits) if type(c) is KVCache else c for c in cache]
    prompt = mx.array(prompt)
    while len(prompt) > 1:
        n = min(chunk, len(prompt) - 1)
        model(prompt[:n][None], cache=cache)
        maybe_quantize_kv_cache(cache, start, group, bits)
        mx.eval([c.state for c in cache])
        prompt = prompt[n:]
    out = []
    for token in [prompt.tolist()[0]] + list(tokens[:-1]):
        logits = model(mx.array([[token]]), cache=cache)[0, -1]
        maybe_quantize_kv_cache(cache, start, group, bits)
        out.append(logits - mx.logsumexp(logits))
    return out


def assert_greedy_close(loaded, prompts, got, *, bits, eps, **kw):
    """Every token the engine chose is the reference's greedy choice, or within `eps` (log
    probability) of it: an exact match up to near-ties, which any change in float summation
    order (batching, padding, the shape of a forward) may break either way: with a quantized
    cache a last-bit difference in a key can move it by a whole quantization step."""
    worst = 0.0
    for prompt, tokens in zip(prompts, got):
        for lp, t in zip(forced_logprobs(loaded, prompt, tokens, bits=bits, **kw), tokens):
            worst = max(worst, float(lp.max() - lp[t]))
    assert worst <= eps, f"a token {worst:.4f} below the reference's greedy choice"
    return worst


async def run_engine(model_dir, prompts, *, specs=None, together=False, n=N_TOKENS, **config):
    """Each prompt's greedy tokens from one engine. together: all requests reach the engine
    thread at once (it is held busy while they are submitted), so they prefill together;
    otherwise they arrive staggered."""
    config = {
        "prefill_chunk": PREFILL_CHUNK,
        "prompt_cache": False,
        "log_blas": False,
        "extra_drafters": SYNTH.entry(),
        **config,
    }
    eng = Engine(EngineConfig(model=str(model_dir), **config))
    eng.start()
    await eng.wait_ready()
    hold = None
    if together:
        hold = asyncio.ensure_future(eng.run_on_engine_thread(lambda: time.sleep(0.3)))
        await asyncio.sleep(0.05)
    results = {}

    async def one(i, prompt):
        spec = specs[i] if specs else SpeculativeParams()
        request = GenerationRequest(prompt_tokens=prompt, max_tokens=n, speculative=spec)
        async for event in eng.submit(request):
            if isinstance(event, FinishedEvent):
                results[i] = event
                return
            if isinstance(event, ErrorEvent):
                raise AssertionError(f"request failed: {event.message}")

    tasks = []
    for i, prompt in enumerate(prompts):
        tasks.append(asyncio.create_task(one(i, prompt)))
        if not together:
            await asyncio.sleep(0.02 * (i % 3))
    if hold is not None:
        await hold
    await asyncio.gather(*tasks)
    await eng.stop()
    return [results[i] for i in range(len(prompts))]


def tokens_of(events):
    return [e.token_ids for e in events]


# -- (a) equal to mlx-lm's quantized single-request generation ---------------------------------


@pytest.mark.parametrize("bits", [8, 4])
def test_quantized_from_start_one_request_equals_mlx_lm(llama, llama_mlx, bits):
    prompts = make_prompts(2, seed=bits)
    expected = reference(llama_mlx, prompts, bits=bits, start=0)
    got = [asyncio.run(run_engine(llama, [p], kv_bits=bits, kv_start=0))[0] for p in prompts]
    assert tokens_of(got) == expected


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("together", [True, False], ids=["together", "staggered"])
def test_quantized_from_start_batch_matches_mlx_lm(llama, llama_mlx, bits, together):
    # four prompts of 3 to 60 tokens, chunked prefill, batched decoding: the same computation
    # as mlx-lm's single request up to float summation order (padding, batched forwards)
    prompts = make_prompts(4, seed=10 + bits)
    got = asyncio.run(run_engine(llama, prompts, together=together, kv_bits=bits, kv_start=0))
    got = tokens_of(got)
    expected = reference(llama_mlx, prompts, bits=bits, start=0)
    if together:  # one schedule, so one computation: token for token
        assert got == expected
    else:  # the schedule depends on timing: exact up to near-ties, and mostly exact
        assert_greedy_close(llama_mlx, prompts, got, bits=bits, start=0, eps=EPS)
        assert sum(g == e for g, e in zip(got, expected)) >= 3
    if bits == 4:  # the comparison sees 4-bit quantization: unquantized logits fail it
        with pytest.raises(AssertionError):
            assert_greedy_close(llama_mlx, prompts, got, bits=None, start=0, eps=EPS)


@pytest.mark.parametrize("bits", [8, 4])
def test_kv_start_one_request_equals_mlx_lm(llama, llama_mlx, bits):
    # converted in the middle of the prompt (after the chunk that reaches 20 positions), as
    # mlx-lm does with the same prefill step size; and one that converts while decoding
    prompts = make_prompts(2, seed=40 + bits, min_len=40, max_len=60)
    for prompt, start in zip(prompts, (20, len(prompts[1]) + 5)):
        expected = reference(llama_mlx, [prompt], bits=bits, start=start)
        got = asyncio.run(run_engine(llama, [prompt], kv_bits=bits, kv_start=start))
        assert tokens_of(got) == expected


@pytest.mark.parametrize("bits", [8, 4])
def test_kv_start_batch_prefilled_together_matches_mlx_lm(llama, llama_mlx, bits):
    # every prompt (two shorter than kv_start, two longer) prefilled in one forward; the batch
    # converts as the long rows join, so every row is quantized from its first decode step:
    # mlx-lm's rule at quantized_kv_start 0 (first chunk unquantized) with one prefill chunk,
    # which for the long rows is also its rule at start 24
    prompts = make_prompts(2, seed=50 + bits, min_len=4, max_len=10)
    prompts += make_prompts(2, seed=60 + bits, min_len=30, max_len=60)
    got = asyncio.run(
        run_engine(llama, prompts, together=True, prefill_chunk=512, kv_bits=bits, kv_start=24)
    )
    # quantized_kv_start=1 in mlx-lm: the one prefill chunk unquantized, then quantized
    assert tokens_of(got) == reference(llama_mlx, prompts, bits=bits, start=1, chunk=512)
    long_rows = reference(llama_mlx, prompts[2:], bits=bits, start=24, chunk=512)
    assert tokens_of(got[2:]) == long_rows


@pytest.mark.parametrize("concurrency", [1, 4])
def test_sliding_window_layers_stay_unquantized(gemma, concurrency):
    # Gemma 3 shaped: global layers quantized, sliding-window layers not (mlx-lm's own
    # kv_bits path raises on RotatingKVCache; its QuantizedKVCache path is the reference)
    prompts = make_prompts(concurrency, seed=70 + concurrency, min_len=9, max_len=40)
    expected = reference(mlx_load(str(gemma)), prompts, bits=4, start=0)
    got = asyncio.run(run_engine(gemma, prompts, kv_bits=4, kv_start=0))
    assert tokens_of(got) == expected


def test_batched_quantized_logits_match_mlx_lm(llama_mlx):
    """8 bits does not change the tiny model's greedy tokens, so compare logits: three rows of
    different lengths decoded together on a BatchQuantizedKVCache (two merged, one joining
    later through extend, from an unquantized prefill) against each row alone on mlx-lm's
    QuantizedKVCache."""
    model, _ = llama_mlx
    layers = len(model.layers)
    prompts = make_prompts(3, seed=80, min_len=5, max_len=40)
    steps = [[(101 + 37 * i + 11 * j) % 49152 for j in range(6)] for i in range(3)]

    def prefilled(prompt, quantized_first, quantize_after=False):
        cache = [QuantizedKVCache(64, 8) if quantized_first else KVCache() for _ in range(layers)]
        model(mx.array(prompt)[None], cache=cache)
        if quantize_after:  # what the engine does when a row joins a quantized batch
            cache = [c.to_quantized(group_size=64, bits=8) for c in cache]
        return cache

    def alone(i, **how):
        cache = prefilled(prompts[i], **how)
        return [model(mx.array([[t]]), cache=cache)[0, -1] for t in steps[i]]

    expected = [alone(0, quantized_first=True), alone(1, quantized_first=True)]
    expected.append(alone(2, quantized_first=False, quantize_after=True))
    unquantized = [alone(i, quantized_first=False) for i in range(3)]
    rows = [prefilled(p, True) for p in prompts[:2]]
    batch = [BatchQuantizedKVCache.merge([r[i] for r in rows]) for i in range(layers)]
    late = prefilled(prompts[2], False)
    for layer, c in zip(batch, late):
        layer.extend(KVCache.merge([c]))  # a BatchKVCache row: quantized as it joins
    got = []
    for j in range(6):
        x = mx.array([[steps[i][j]] for i in range(3)])
        got.append(model(x, cache=batch)[:, -1])

    def worst(a, b):
        return max(float(mx.abs(a[i][j] - b[i][j]).max()) for i in range(3) for j in range(6))

    batched = [[got[j][i] for j in range(6)] for i in range(3)]
    assert worst(batched, expected) < 1e-4
    assert worst(unquantized, expected) > 50 * worst(batched, expected)  # 8 bits is visible
    for i, prompt in enumerate(prompts):
        row = batch[0].extract(i)
        assert isinstance(row, QuantizedKVCache) and row.offset == len(prompt) + 6


@pytest.mark.parametrize("bits", [8, 4])
def test_rollback_of_quantized_rows_moves_exactly_the_kept_positions(llama_mlx, bits):
    """A verify-shaped write of 4 positions per row, then a per-row rollback: each row holds
    exactly its first positions, bit for bit (data, scales and biases), and the next write
    lands right after them."""
    model, _ = llama_mlx
    prompts = make_prompts(3, seed=90, min_len=5, max_len=30)
    kept = [1, 4, 2]
    rows = []
    for p in prompts:
        cache = [QuantizedKVCache(64, bits) for _ in model.layers]
        model(mx.array(p)[None], cache=cache)
        rows.append(cache)
    layers = [BatchQuantizedKVCache.merge([r[i] for r in rows]) for i in range(len(rows[0]))]
    model(mx.array([[200 + 10 * i + j for j in range(4)] for i in range(3)]), cache=layers)
    before = [[layer.extract(i) for i in range(3)] for layer in layers]
    rollback_rows(layers, [4 - k for k in kept])
    assert layers[0].offset.tolist() == [len(p) + k for p, k in zip(prompts, kept)]
    for layer, old in zip(layers, before):
        for i, k in enumerate(kept):
            row, n = layer.extract(i), len(prompts[i]) + k
            assert row.offset == n
            for a, b in zip(row.keys + row.values, old[i].keys + old[i].values):
                assert mx.array_equal(a, b[..., :n, :]).item()
    model(mx.array([[7], [8], [9]]), cache=layers)
    assert layers[0].offset.tolist() == [len(p) + k + 1 for p, k in zip(prompts, kept)]


# -- (b) speculation on a quantized cache changes nothing ---------------------------------------


@pytest.mark.parametrize("bits,start", [(8, 0), (4, 0), (4, 8)])
def test_speculation_on_quantized_cache_equals_plain_decoding(llama, bits, start):
    # start 8 < every prompt: rows are quantized before their first verify round
    prompts = [p for p in repetitive_prompts(8, seed=100 + bits) if len(p) > 9][:4]
    plain = asyncio.run(run_engine(llama, prompts, kv_bits=bits, kv_start=start, n=24))
    plain = tokens_of(plain)
    specs = [
        SpeculativeParams(method=SpecMethod.PROMPT_LOOKUP, draft_tokens=3, ngram_max=3),
        synthetic(prompts[1], plain[1], 0.6, 5),
        SpeculativeParams(method=SpecMethod.AUTO, draft_tokens=6),
        SpeculativeParams(),
    ]
    got = asyncio.run(run_engine(llama, prompts, specs=specs, kv_bits=bits, kv_start=start, n=24))
    assert tokens_of(got) == plain
    assert got[0].stats.spec.rounds > 0 and got[1].stats.spec.accepted_tokens > 0


def test_draft_model_on_quantized_target(llama):
    # the draft's own cache stays unquantized; the target's quantized tokens are unchanged
    prompts = repetitive_prompts(3, seed=110)
    plain = tokens_of(asyncio.run(run_engine(llama, prompts, kv_bits=8, n=16)))
    specs = [SpeculativeParams(method=SpecMethod.DRAFT_MODEL, draft_tokens=k) for k in (3, 1, 5)]
    got = asyncio.run(
        run_engine(llama, prompts, specs=specs, draft_model=str(llama), kv_bits=8, n=16)
    )
    assert tokens_of(got) == plain
    assert all(e.stats.spec.accepted_tokens > 0 for e in got)


@pytest.mark.parametrize("bits", [8, 4])
def test_short_rows_beside_a_long_one_attend_over_their_own_quantized_keys(
    llama, llama_mlx, bits, monkeypatch
):
    # attention by row groups (engine/cache/row_groups.py) over quantized keys and values
    row_groups.set_enabled(True)
    splits = []
    taken = row_groups._taken
    monkeypatch.setattr(row_groups, "_taken", lambda k, v: splits.append(taken(k, v)) or splits[-1])
    short = make_prompts(2, seed=60 + bits)
    prompts = [short[0], make_prompts(1, seed=62 + bits, min_len=600, max_len=600)[0], short[1]]
    try:
        got = asyncio.run(
            run_engine(llama, prompts, together=True, prefill_chunk=1024, kv_bits=bits, kv_start=0)
        )
    finally:
        row_groups.set_enabled(None)
    # every prompt prefilled in the first step, so that the rows decode side by side
    assert tokens_of(got) == reference(llama_mlx, prompts, bits=bits, start=0, chunk=1024)
    assert any(groups is not None for groups in splits)
