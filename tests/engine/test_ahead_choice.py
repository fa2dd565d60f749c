"""The choice between verify rounds ahead and in series (engine/core/ahead_choice.py): each
batch size times both ways and keeps the one that gave more tokens per second, counts no round
that started or drained the pipeline, times both again now and then, and rows still equal
mlx_lm.generate alone while the way changes under them."""

from __future__ import annotations

import random

import pytest

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine.core.ahead_choice import AheadChoice, batch_bucket
from tests.engine.engine_harness import Driver, make_core, make_prompt, make_tiny, synthetic


def run(choice: AheadChoice, rows: int, rounds: int, *, serial_s: float, ahead_s: float) -> list:
    """`rounds` rounds, each the way the choice wants, 4 tokens at these costs; the ways run."""
    ways = []
    for _ in range(rounds):
        ahead = choice.wants_ahead(rows)
        ways.append(ahead)
        choice.record(rows, ahead=ahead, seconds=ahead_s if ahead else serial_s, tokens=4)
    return ways


def test_times_both_ways_in_turn_and_keeps_the_faster():
    choice = AheadChoice(leg_rounds=3, retry_every=100)
    ways = run(choice, 4, 50, serial_s=0.0105, ahead_s=0.01)
    # eight legs, serial first, each of a switch's own round (not counted) and three counted
    assert ways[:32] == ([False] * 4 + [True] * 4) * 4
    assert all(ways[32:])
    summary = choice.summary()["4"]
    assert summary == {
        "ahead": True,
        "timing_both": False,
        "serial_ms_per_token": 2.625,
        "ahead_ms_per_token": 2.5,
    }

    slower = AheadChoice(leg_rounds=3, retry_every=100)
    assert not any(run(slower, 4, 50, serial_s=0.01, ahead_s=0.0105)[32:])


def test_a_clear_winner_ends_the_trial_after_four_legs():
    """Every leg of one way 20% faster than every leg of the other: the trial stops there."""
    choice = AheadChoice(leg_rounds=3, retry_every=100)
    ways = run(choice, 4, 50, serial_s=0.02, ahead_s=0.01)
    assert ways[:16] == ([False] * 4 + [True] * 4) * 2
    assert all(ways[16:]) and not choice.summary()["4"]["timing_both"]
    slower = AheadChoice(leg_rounds=3, retry_every=100)
    assert not any(run(slower, 4, 50, serial_s=0.01, ahead_s=0.0125)[16:])


def test_a_switch_of_way_is_not_counted():
    """Switching to rounds ahead reports nothing in its first round, and switching back reports
    two rounds' tokens at once: neither decides anything."""
    choice = AheadChoice(leg_rounds=2, retry_every=50)
    assert choice.wants_ahead(1) is False
    choice.record(1, ahead=False, seconds=1e-6, tokens=8)  # the first round of all
    assert choice.buckets[1].ways[False].rounds == 0
    choice.record(1, ahead=False, seconds=0.01, tokens=4)
    assert choice.buckets[1].ways[False].rounds == 1
    choice.record(1, ahead=True, seconds=1e-6, tokens=0)  # not the way this bucket runs now
    choice.record(1, ahead=False, seconds=1e-6, tokens=8)  # back from it
    assert choice.buckets[1].ways[True].rounds == 0 and choice.buckets[1].ways[False].rounds == 1


def test_both_ways_are_timed_again_and_a_change_is_followed():
    choice = AheadChoice(leg_rounds=2, retry_every=40)
    assert all(run(choice, 8, 30, serial_s=0.03, ahead_s=0.01)[24:])
    # the machine changes: ahead becomes the slower way; the next trial finds it out
    ways = run(choice, 8, 70, serial_s=0.01, ahead_s=0.05)
    assert all(ways[:22]) and False in ways[22:34]
    assert not any(ways[-20:]) and choice.wants_ahead(8) is False


def test_one_slow_round_does_not_decide():
    """On CUDA the first forward of a new shape builds its graph: one round can take a second."""
    choice = AheadChoice(leg_rounds=3, retry_every=100)
    slow = {1}  # the serial leg's first counted round
    for i in range(40):
        ahead = choice.wants_ahead(4)
        seconds = 0.02 if ahead else (1.0 if i in slow else 0.01)
        choice.record(4, ahead=ahead, seconds=seconds, tokens=4)
    assert choice.wants_ahead(4) is False
    assert choice.summary()["4"]["serial_ms_per_token"] == 2.5


def test_batch_sizes_choose_apart():
    assert [batch_bucket(n) for n in (1, 2, 3, 4, 7, 8, 16, 32)] == [1, 2, 2, 3, 3, 4, 5, 6]
    choice = AheadChoice(leg_rounds=2, retry_every=100)
    run(choice, 1, 30, serial_s=0.01, ahead_s=0.02)
    run(choice, 16, 30, serial_s=0.02, ahead_s=0.01)
    assert choice.wants_ahead(1) is False and choice.wants_ahead(16) is True
    assert set(choice.summary()) == {"1", "16"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_tiny(tmp_path_factory.mktemp("choice"))


def test_rows_equal_generate_while_the_way_keeps_changing(tiny, monkeypatch):
    from tests.engine.engine_harness import SYNTH

    monkeypatch.setattr(SYNTH, "_rng", random.Random(0))
    core = make_core(tiny)
    ahead = core.executor.ahead
    ahead.on = None  # the measured choice, as on a GPU (the CPU's default is in series)
    ahead.choice = AheadChoice(leg_rounds=1, retry_every=1)  # switch every round or two
    ways = []
    wants = ahead.choice.wants_ahead
    ahead.choice.wants_ahead = lambda rows: ways.append(wants(rows)) or ways[-1]
    driver = Driver(core)
    n = 40
    rows = {}
    for i, p in enumerate((0.9, 0.5, 1.0)):
        prompt = make_prompt(30 + i, 12 + 5 * i)
        spec = synthetic(prompt, tiny.greedy(prompt, n), p, 4)
        rows[driver.add(prompt, n, speculative=spec)] = prompt
    driver.finish()
    for rid, prompt in rows.items():
        assert driver.tokens[rid] == tiny.greedy(prompt, n)
    assert ways.count(True) >= 3 and ways.count(False) >= 3
    assert ahead.choice.buckets  # the rounds were timed
