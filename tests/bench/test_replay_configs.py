"""`python -m engine.bench --replay-too`: each speculative setting also runs with recurrent rows
replaying kept tokens, in the same process, and the rows say which is which."""

from __future__ import annotations

from engine.bench.__main__ import parse_args
from engine.bench.result_rows import print_row
from engine.bench.spec_configs import spec_configs


def test_replay_too_doubles_each_setting():
    args = parse_args(["--speculative", "synthetic", "--acceptance", "0.7", "0.9", "--replay-too"])
    configs = spec_configs(args)
    assert [(c.acceptance, c.replay) for c in configs] == [
        (0.7, False),
        (0.7, True),
        (0.9, False),
        (0.9, True),
    ]
    assert not any(c.replay for c in spec_configs(parse_args(["--speculative", "lookup"])))


def test_a_replay_row_is_labelled(capsys):
    row = {
        "concurrency": 4,
        "workload": "chat",
        "speculative": "synthetic",
        "draft_tokens": 4,
        "acceptance": 0.9,
        "recurrent_replay": True,
        "ours_tokens_per_s": 10.0,
        "baseline_tokens_per_s": None,
        "plain_tokens_per_s": 8.0,
        "speedup_vs_plain": 1.25,
        "speedup_paired": 1.2,
        "mean_acceptance_length": 3.0,
        "ours_mean_ttft_s": 0.1,
        "lossless": True,
    }
    print_row(row)
    assert "synthetic(k=4 p=0.9 replay)" in capsys.readouterr().out
