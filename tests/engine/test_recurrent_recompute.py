"""Recurrent state after a verify round without replaying kept tokens (engine/cache/
recurrent_capture.py, `RecurrentSnapshot.recompute_rows`): a row that keeps only part of what a
forward fed it gets exactly the state a forward feeding only that part gives; rows that keep
everything keep the forward's own state; and layers the capture does not describe are refused."""

from __future__ import annotations

import asyncio

import mlx.core as mx
import pytest
from mlx_lm.utils import load

from engine.cache import recurrent_capture
from engine.cache.batch_rows import merge_row_caches
from engine.cache.cache_list import leaves
from engine.cache.recurrent import RecurrentSnapshot, is_recurrent, set_lengths
from engine.requests import SpeculativeParams
from tests.architectures.build import build_model
from tests.architectures.catalog import BY_NAME
from tests.engine.engine_harness import synthetic
from tests.engine.test_exactness import make_prompts, reference_tokens, run_engine
from tests.tiny_models import make_tiny_qwen3_next_dir, prefill

FED = [[5, 6, 7, 8, 9], [10, 11, 12, 13, 14], [15, 16, 17, 18, 19]]


@pytest.fixture(scope="module")
def qwen3_next(tmp_path_factory):
    return make_tiny_qwen3_next_dir(tmp_path_factory.mktemp("qwen3_next"))


def _batch(model, prompts):
    recurrent_capture.install()
    return merge_row_caches([prefill(model, p) for p in prompts])


def _recurrent_arrays(cache):
    return [a for c in leaves(cache) if is_recurrent(c) for a in c.cache]


def test_recomputed_state_equals_a_forward_over_the_kept_tokens(qwen3_next):
    model, _ = load(str(qwen3_next))
    prompts = [[1, 2, 3, 4, 20, 21], [1, 2, 30], [1, 40, 41, 42]]
    kept = [2, 5, 1]  # row 1 keeps all it was fed

    cache = _batch(model, prompts)
    snapshot = RecurrentSnapshot.take(cache)
    with recurrent_capture.capturing() as capture:
        model(mx.array(FED), cache=cache)
    assert snapshot.recompute_rows(capture, kept, [k < 5 for k in kept])

    want = _batch(model, prompts)
    set_lengths(want, kept)
    model(mx.array(FED), cache=want)
    set_lengths(want, None)
    got, expected = _recurrent_arrays(cache), _recurrent_arrays(want)
    assert len(got) == len(expected) > 0
    for a, b in zip(got, expected):
        assert mx.array_equal(a, b).item()


@pytest.mark.parametrize(
    "name",
    [
        "qwen3_5", "kimi_linear", "olmo_hybrid", "bailing_moe_v3", "mamba2", "nemotron_h",
        "lfm2", "mamba", "jamba", "rwkv7", "recurrent_gemma", "bailing_moe_linear",
        "baichuan_m1", "bailing_hybrid",
    ],
)  # fmt: skip
def test_recompute_equals_feeding_each_row_its_kept_tokens_alone(name):
    """Gated-delta layers with one conv (Qwen3.5) and with three (q, k, v: Kimi Linear, OLMo
    hybrid, Bailing v3), Mamba 2 layers (Mamba 2, Nemotron-H), conv-only layers (LFM2) and
    Mamba 1 blocks (one `ssm_step` per token: Mamba; one over the sequence: Jamba): each row's
    arrays equal, to float rounding (the batch computes five positions at once), those of its
    own cache fed only what it kept."""
    model, _ = build_model(BY_NAME[name])
    prompts = [[1, 2, 3, 4, 20, 21], [1, 2, 30, 31, 32, 33], [1, 40, 41, 42, 43, 44]]
    kept = [2, 5, 1]
    cache = _batch(model, prompts)
    snapshot = RecurrentSnapshot.take(cache)
    with recurrent_capture.capturing() as capture:
        model(mx.array(FED), cache=cache)
    assert snapshot.recompute_rows(capture, kept, [k < 5 for k in kept])
    for i, (prompt, fed, k) in enumerate(zip(prompts, FED, kept)):
        alone = prefill(model, prompt + fed[:k])
        got = [a[i : i + 1] for a in _recurrent_arrays(cache)]
        want = _recurrent_arrays(alone)
        assert len(got) == len(want) > 0
        for a, b in zip(got, want):
            scale = max(1.0, mx.abs(b).max().item())  # Mamba 1's random states reach 1e3
            assert mx.allclose(a, b, atol=1e-4 * scale, rtol=1e-4).item(), (name, i)


def test_a_capture_that_does_not_fit_changes_nothing(qwen3_next):
    model, _ = load(str(qwen3_next))
    cache = _batch(model, [[1, 2, 3], [1, 4]])
    snapshot = RecurrentSnapshot.take(cache)
    with recurrent_capture.capturing() as capture:
        model(mx.array(FED[:2]), cache=cache)
    after = [mx.array(a) for a in _recurrent_arrays(cache)]
    capture.calls.pop()  # one layer's recurrence call missing: the pairing is unknown
    assert not snapshot.recompute_rows(capture, [1, 2], [True, True])
    assert not snapshot.recompute_rows(None, [1, 2], [True, True])
    for a, b in zip(_recurrent_arrays(cache), after):
        assert mx.array_equal(a, b).item()


def test_nothing_is_recorded_outside_a_capture(qwen3_next):
    model, _ = load(str(qwen3_next))
    with recurrent_capture.capturing() as capture:
        pass
    model(mx.array(FED[:1]), cache=prefill(model, [1, 2, 3]))
    assert capture.calls == [] and capture.conv_inputs == []
    with recurrent_capture.capturing(False) as off:
        assert off is None


@pytest.mark.parametrize("replay", [False, True])
def test_both_rollbacks_are_exact_in_the_engine(qwen3_next, replay, monkeypatch):
    """Recompute (the default) and replay (TANDEM_RECURRENT_REPLAY=1) give mlx_lm.generate's
    tokens, with rejected drafts in most rounds."""
    if replay:
        monkeypatch.setenv(recurrent_capture.REPLAY_ENV, "1")
    prompts = make_prompts(3, vocab=49152, seed=41, min_len=3, max_len=30)
    expected = reference_tokens(qwen3_next, prompts, max_tokens=20)
    specs = [synthetic(p, e, 0.4, 4) for p, e in zip(prompts[:2], expected[:2])]
    specs.append(SpeculativeParams())
    got = asyncio.run(run_engine(qwen3_next, prompts, 20, stagger=True, specs=specs))
    assert got == expected


@pytest.mark.parametrize("stop_at", [3, 5, 6, 8])
def test_a_reply_that_ends_inside_its_draft_is_stored_whole(qwen3_next, stop_at, tmp_path):
    """A reply that ends inside an accepted draft (here at a stop string) leaves positions fed
    past its end; recurrent state cannot be trimmed, so it is recomputed at the reply's end
    from the last verify round and stored there: the next turn hits the whole history. This
    needs the stop found in the round that produced it (text is otherwise made while the next
    forward runs: a row with stop strings streams at once)."""
    from mlx_lm.utils import load as mlx_load

    from engine.requests import GenerationRequest
    from tests.engine.engine_harness import collect, make_prompt, with_engine

    _, tokenizer = mlx_load(str(qwen3_next))
    first = make_prompt(70, 15)
    reply = reference_tokens(qwen3_next, [first], max_tokens=24)[0]
    stop = tokenizer.decode(reply[stop_at : stop_at + 1])

    async def body(eng):
        spec = synthetic(first, reply, 1.0, 4)
        request = GenerationRequest(
            prompt_tokens=first, max_tokens=24, speculative=spec, stop=(stop,)
        )
        one = await collect(eng, request)
        second = first + one.tokens + [42, 43, 44]
        two = await collect(eng, GenerationRequest(prompt_tokens=second, max_tokens=8))
        return one, second, two, eng.stats().cache

    one, second, two, stats = with_engine(
        qwen3_next, body, prompt_cache=True, prompt_cache_dir=str(tmp_path)
    )
    assert len(one.tokens) < len(reply) and one.tokens == reply[: len(one.tokens)]
    assert two.tokens == reference_tokens(qwen3_next, [second], max_tokens=8)[0]
    whole = two.finished.stats.cached_tokens >= len(first) + len(one.tokens) - 1
    assert whole and "untrimmable-tail" not in stats.skipped, stats


@pytest.mark.parametrize(
    "name",
    [
        "mamba2", "granitemoehybrid", "falcon_h1", "plamo2", "lfm2", "kimi_linear",
        "nemotron_h", "olmo_hybrid", "mamba", "jamba", "rwkv7", "recurrent_gemma",
        "bailing_moe_linear", "baichuan_m1", "bailing_hybrid",
    ],
)  # fmt: skip
def test_recompute_is_exact_across_families(name, tmp_path, monkeypatch):
    """Rows that mostly reject their drafts, on Mamba 2 layers (Mamba 2, Granite 4 hybrid,
    Falcon-H1, PLaMo 2), LFM2's, Kimi Linear's, and layers that take a row's padding into its
    state (Nemotron-H, OLMo hybrid, Mamba, Jamba: every padded row is recomputed): every row's
    tokens are mlx_lm.generate's."""
    from tests.architectures.build import save_folder
    from tests.architectures.tokenizer import TINY_VOCAB
    from tests.engine.engine_harness import SYNTH

    monkeypatch.setattr(SYNTH, "vocab_size", TINY_VOCAB)  # wrong drafts within these models

    path = save_folder(BY_NAME[name], tmp_path / name)
    prompts = make_prompts(3, vocab=TINY_VOCAB, seed=43, min_len=3, max_len=20)
    expected = reference_tokens(path, prompts, max_tokens=16)
    specs = [synthetic(p, e, 0.4, 4) for p, e in zip(prompts[:2], expected[:2])]
    specs.append(SpeculativeParams())
    got = asyncio.run(run_engine(path, prompts, 16, stagger=True, specs=specs))
    assert got == expected


def test_a_model_that_masks_padding_has_no_problem_to_undo():
    from engine.core.batch_check import padding_check

    model, _ = build_model(BY_NAME["qwen3_5"])
    assert padding_check(model) == (None, False)


@pytest.mark.parametrize(
    ("name", "undone"),
    [("mamba", True), ("jamba", True), ("nemotron_h", True), ("olmo_hybrid", True),
     ("rwkv7", True), ("recurrent_gemma", True), ("bailing_moe_linear", True),
     ("baichuan_m1", True)],
)  # fmt: skip
def test_padding_in_the_state_is_undone_by_recompute_where_the_capture_fits(name, undone):
    """Layers that ignore `lengths` take a padded row's padding into its state; recomputing
    every padded row undoes it where the capture describes the layers (then such a model
    speculates; RWKV 7's token shifts and `_wkv7`, RecurrentGemma's conv and `rnn_scan`,
    Bailing linear's `recurrent_gla` and Baichuan-M1's k and v convolutions too)."""
    from engine.core.batch_check import padding_check, padding_problem, recompute_undoes_padding

    model, _ = build_model(BY_NAME[name])
    assert padding_problem(model) is not None
    assert recompute_undoes_padding(model) == undone
    problem, undone_at_load = padding_check(model)  # the engine's one call at load
    assert problem is not None and undone_at_load == undone


def test_with_replay_forced_padding_is_not_undone(monkeypatch):
    from engine.core.batch_check import padding_check, recompute_undoes_padding

    monkeypatch.setenv(recurrent_capture.REPLAY_ENV, "1")
    model, _ = build_model(BY_NAME["mamba"])
    assert not recompute_undoes_padding(model)
    assert padding_check(model)[1] is False
