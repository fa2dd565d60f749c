"""`python -m engine.bench.shared_step` times each way to run a step with a riding chunk, and
leaves every cache where it found it (each run sees the same positions)."""

from __future__ import annotations

import json

import pytest

from engine.bench import shared_step


def test_shared_step_times_each_way_per_chunk(tmp_path):
    out = tmp_path / "shared.json"
    args = ["--model", "random:tiny", "--rows", "2", "--row-context", "20", "--context", "30"]
    args += ["--chunks", "4", "8", "--repeats", "2", "--json", str(out)]
    assert shared_step.main(args) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["chunk"] for r in rows] == [4, 8]
    keys = ("decode_ms", "chunk_ms", "separate_ms", "shared_ms")
    assert all(r[k] > 0 for r in rows for k in keys)


def test_a_prompt_chunk_from_the_first_position_is_timed_too(tmp_path):
    args = ["--model", "random:tiny", "--rows", "1", "--row-context", "8", "--context", "0"]
    assert shared_step.main([*args, "--chunks", "4", "--repeats", "1"]) == 0


@pytest.mark.parametrize(
    "bad", [["--chunks", "0"], ["--rows", "0"], ["--context", "-1"], ["--repeats", "0"]]
)
def test_arguments_out_of_range_are_refused_with_a_message(bad, capsys):
    with pytest.raises(SystemExit) as exit_:
        shared_step.main(["--model", "random:tiny", *bad])
    assert exit_.value.code == 2 and "must be" in capsys.readouterr().err
