"""The benchmark's paired ratio: the median of run-by-run ratios of alternated runs."""

from __future__ import annotations

from engine.bench.baselines import RunResult, add_single_stream, paired_ratio


def test_a_host_that_switches_speed_between_runs_moves_both_sides_of_a_pair():
    # runs at two host speeds: ours is 0.95 of theirs in every pair
    theirs = [300.0, 480.0, 300.0, 480.0, 480.0]
    ours = [0.95 * t for t in theirs]
    assert paired_ratio(ours, theirs) == 0.95
    # one of our runs fell in a slow spell: the median of pairs still says 0.95, where the
    # ratio of medians (285 / 480) would say 0.59
    assert paired_ratio([285.0, 285.0, 456.0], [300.0, 480.0, 480.0]) == 0.95
    assert paired_ratio([], []) is None
    assert paired_ratio([1.0], [0.0]) is None


def test_single_stream_fields():
    row = {"ours_tokens_per_s": 95.0, "ours_runs_tokens_per_s": [90.0, 100.0]}
    runs = [RunResult([[1] * 10], 0.1, [0.01]), RunResult([[1] * 10], 0.1, [0.01])]
    add_single_stream(row, runs, plain=95.0)
    assert row["single_stream_runs_tokens_per_s"] == [100.0, 100.0]
    assert row["ratio_vs_single_stream"] == 0.95
    assert row["ratio_vs_single_stream_paired"] == 0.95
