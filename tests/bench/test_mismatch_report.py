"""The benchmark's lossless check says where a row first differs from mlx_lm.generate and how
close the reference's top two logits were there (a near-tie, or a real fault)."""

import mlx.core as mx

from engine.bench.baselines import RunResult, mismatches


def fake_model(ids: mx.array) -> mx.array:
    logits = mx.zeros((1, ids.shape[1], 5))
    return logits + mx.array([0.0, 0.0, 1.0, 0.75, 0.0])  # top 2.0 - runner-up 0.75


def test_reports_first_difference_and_margin():
    expected = [[1, 2, 3], [4, 4]]
    run = RunResult([[1, 2, 3], [4, 9, 9]], 1.0, [0.1, 0.1])
    assert mismatches(fake_model, [[7], [8]], expected, [run]) == [
        {"row": 1, "at": 1, "margin": 0.25}
    ]


def test_a_longer_row_differs_where_the_reference_ended():
    run = RunResult([[1, 2, 3, 4]], 1.0, [0.1])
    assert mismatches(fake_model, [[7]], [[1, 2, 3]], [run])[0]["at"] == 3


def test_equal_rows_report_nothing():
    assert mismatches(fake_model, [[7]], [[1]], [RunResult([[1]], 1.0, [0.1])]) == []
