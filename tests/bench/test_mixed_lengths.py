"""`python -m engine.bench.mixed_lengths` runs chats of very different lengths with attention by
row groups and padded, alternated, and reports both ways' tokens and speed."""

from __future__ import annotations

import json

import pytest

from engine.bench import mixed_lengths
from engine.cache import row_groups


def test_both_ways_give_the_same_tokens_and_a_ratio(tmp_path):
    out = tmp_path / "mixed.json"
    args = ["--model", "random:tiny", "--short", "2", "--short-tokens", "10"]
    args += ["--long-tokens", "1500", "--max-tokens", "6", "--repeats", "1", "--check"]
    assert mixed_lengths.main([*args, "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["lengths"] == [10, 1500, 10]  # the long row between short ones
    assert report["same_tokens"] and all(report["lossless"])
    assert report["grouped_tokens_per_s"] > 0 and report["padded_tokens_per_s"] > 0
    assert report["ratio"] > 0
    assert report["grouped_split_calls"] > 0 and report["padded_split_calls"] == 0
    assert row_groups._state["enabled"] is None  # the device's own choice again afterwards


@pytest.mark.parametrize("bad", [["--short", "0"], ["--long-tokens", "0"], ["--repeats", "0"]])
def test_arguments_out_of_range_are_refused_with_a_message(bad, capsys):
    with pytest.raises(SystemExit) as exit_:
        mixed_lengths.main(["--model", "random:tiny", *bad])
    assert exit_.value.code == 2 and "must be" in capsys.readouterr().err
