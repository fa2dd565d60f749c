"""The choice of a ragged batch's plain-step attention (engine/core/decode_attention_choice.py):
one-query calls switched between the CUDA kernel and MLX's ops for the plain step's forward only,
both ways timed per batch size and the faster kept, nothing timed or switched where the kernel
is not installed (the CPU, Metal), and rows still equal mlx_lm.generate while the way changes."""

from __future__ import annotations

import mlx.core as mx
import pytest

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine.core import decode_attention_choice as dac
from engine.core.decode_attention_choice import DecodeAttentionChoice
from engine.kernels import verify_attention_cuda as vac
from tests.engine.engine_harness import Driver, make_core, make_prompt, make_tiny


def call(n: int):
    """A ragged batch's attention call: `n` queries a row behind a mask of the rows' padding."""
    q = mx.zeros((4, 8, n, 64), dtype=mx.bfloat16)
    k = v = mx.zeros((4, 2, 96, 64), dtype=mx.bfloat16)
    return q, k, v, mx.ones((4, 1, n, 96), dtype=mx.bool_)


def test_one_query_calls_are_switched_and_several_are_not():
    assert vac.takes(*call(1)) and vac.takes(*call(5))
    with vac.one_query_calls(False):
        assert not vac.takes(*call(1))
        assert vac.takes(*call(5))  # a verify forward keeps the kernel
        with vac.one_query_calls(True):
            assert vac.takes(*call(1))
        assert not vac.takes(*call(1))
    assert vac.takes(*call(1))  # put back as it was


def test_one_query_calls_are_put_back_after_an_error():
    with pytest.raises(RuntimeError), vac.one_query_calls(False):
        raise RuntimeError("a forward that failed")
    assert vac.takes(*call(1))


def steps(choice: DecodeAttentionChoice, rows: int, n: int, *, kernel_s: float, mlx_s: float):
    """`n` plain steps of `rows` rows, each the way the choice wants, at these costs: the ways
    the one-query calls of each step's forward took."""
    ways, last = [], None
    for _ in range(n):
        choice.step_began(last)
        with choice.launching(rows):
            ways.append(vac.takes(*call(1)))
        last = (1, kernel_s if ways[-1] else mlx_s)
    return ways


@pytest.fixture
def installed(monkeypatch):
    """As on a CUDA machine with the kernel in place (its calls never run here)."""
    monkeypatch.setattr(vac, "is_installed", lambda: True)


def test_both_ways_are_timed_and_the_faster_is_kept(installed, monkeypatch):
    monkeypatch.setattr(dac, "DEFAULT_LEG_STEPS", 2)
    faster_mlx = DecodeAttentionChoice()
    ways = steps(faster_mlx, 4, 80, kernel_s=0.005, mlx_s=0.004)
    assert ways[:12] == ([False] * 3 + [True] * 3) * 2  # a switch's own step is not counted
    assert not any(ways[-30:])
    summary = faster_mlx.summary()["4"]
    assert summary["kernel"] is False and not summary["timing_both"]
    assert summary["mlx_ms_per_token"] == 1.0 and summary["kernel_ms_per_token"] == 1.25
    faster_kernel = DecodeAttentionChoice()
    assert all(steps(faster_kernel, 8, 80, kernel_s=0.004, mlx_s=0.006)[-30:])
    assert vac.takes(*call(1))  # outside a plain step's forward: as installed


def test_a_trial_the_kernel_leads_ends_after_four_legs(installed, monkeypatch):
    """MLX's ops could not be chosen once every kernel leg beat every MLX leg: no more legs."""
    monkeypatch.setattr(dac, "DEFAULT_LEG_STEPS", 2)
    choice = DecodeAttentionChoice()
    ways = steps(choice, 4, 60, kernel_s=0.0048, mlx_s=0.0050)
    assert ways[:12] == ([False] * 3 + [True] * 3) * 2 and all(ways[12:])
    assert not choice.summary()["4"]["timing_both"]


def test_a_near_tie_keeps_the_kernel(installed, monkeypatch):
    """Legs of a few steps cannot resolve a few percent: MLX's ops must win by DEFAULT_MLX_MARGIN."""
    monkeypatch.setattr(dac, "DEFAULT_LEG_STEPS", 2)
    near = DecodeAttentionChoice()
    assert all(steps(near, 4, 80, kernel_s=0.0050, mlx_s=0.0049)[-30:])
    clear = DecodeAttentionChoice()
    assert not any(steps(clear, 4, 80, kernel_s=0.0050, mlx_s=0.0046)[-30:])


def test_a_fixed_way_is_kept_and_not_timed(installed):
    for mode in (True, False):
        choice = DecodeAttentionChoice(mode=mode)
        assert set(steps(choice, 4, 40, kernel_s=0.001, mlx_s=0.009)) == {mode}
        assert choice.choice.buckets == {}


def test_only_plain_steps_are_timed(installed):
    choice = DecodeAttentionChoice()
    with choice.launching(4):
        pass
    choice.step_began((5, 0.01))  # the step was a verify round five tokens wide
    with choice.launching(4):
        pass
    choice.step_began(None)  # it took prompt work
    choice.step_began((1, 0.01))  # nothing launched a plain step since
    assert all(b.ways[w].rounds == 0 for b in choice.choice.buckets.values() for w in (0, 1))


def test_nothing_is_switched_or_timed_without_the_kernel():
    """On the CPU and on Metal the kernel is not installed: one-query calls are MLX's anyway."""
    assert not vac.is_installed()
    choice = DecodeAttentionChoice()
    steps(choice, 4, 40, kernel_s=0.001, mlx_s=0.009)
    assert choice.choice.buckets == {} and choice.summary() == {}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_tiny(tmp_path_factory.mktemp("decode_attention"))


def test_rows_equal_generate_while_the_way_keeps_changing(tiny, installed, monkeypatch):
    """The engine times its plain steps both ways (legs of one step) and its rows, of different
    lengths, keep mlx_lm.generate's tokens."""
    monkeypatch.setattr(dac, "DEFAULT_LEG_STEPS", 1)
    core = make_core(tiny)
    attention = core.executor.attention = DecodeAttentionChoice()
    driver = Driver(core)
    n = 24
    rows = {
        driver.add(make_prompt(40 + i, 9 + 6 * i), n): make_prompt(40 + i, 9 + 6 * i)
        for i in range(3)
    }
    driver.finish()
    for rid, prompt in rows.items():
        assert driver.tokens[rid] == tiny.greedy(prompt, n)
    timed = attention.choice.buckets[2].ways
    assert timed[False].rounds >= 2 and timed[True].rounds >= 2
