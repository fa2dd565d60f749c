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
from engine.cache.recurrent import RecurrentSnapshot, set_lengths
from engine.requests import SpeculativeParams
from tests.engine.engine_harness import synthetic
from tests.engine.test_exactness import make_prompts, reference_tokens, run_engine
from tests.tiny_models import make_tiny_qwen3_next_dir, prefill

FED = [[5, 6, 7, 8, 9], [10, 11, 12, 13, 14], [15, 16, 17, 18, 19]]


@pytest.fixture(scope="module")
def qwen3_next(tmp_path_factory):
    return make_tiny_qwen3_next_dir(tmp_path_factory.mktemp("qwen3_next"))


def _batch(model, prompts):
    return merge_row_caches([prefill(model, p) for p in prompts])


def _recurrent_arrays(cache):
    return [a for c in cache if hasattr(c, "cache") for a in c.cache]


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
