"""The profile ladder (engine/bench/profile_ladder.py) runs every rung on a tiny random model:
each gives a positive time or records why it failed, and the JSON report is written."""

import json

from engine.bench import profile_ladder


def test_every_rung_measures_or_records_its_error(tmp_path, capsys):
    out = tmp_path / "ladder.json"
    argv = ["--model", "random:tiny", "--batch", "1", "2", "--context", "32", "--tokens", "6"]
    assert profile_ladder.main([*argv, "--repeats", "1", "--json", str(out)]) == 0

    report = json.loads(out.read_text())
    rows = report["results"]
    names = {(r["rung"], r["batch"]) for r in rows}
    for batch in (1, 2):
        for rung in (
            "bare-forward", "batch-cache-masked", "ours-cache-equal", "engine-core",
            "engine-api", "bare-verify", "ours-verify", "engine-core-verify", "engine-api-verify",
        ):  # fmt: skip
            assert (rung, batch) in names
    assert ("bare-generate", 1) in names and ("bare-batchgen", 2) in names
    assert ("ours-cache-ragged", 2) in names
    for row in rows:
        assert row.get("ms", 0) > 0 or row.get("error"), row
    # on this tiny model nothing should fail: an error here is a bug in the ladder
    assert [r for r in rows if r.get("error")] == []
    bare = next(r for r in rows if r["rung"] == "bare-forward" and r["batch"] == 2)
    assert bare["ratio_to_bare"] == 1.0
    verify = next(r for r in rows if r["rung"] == "engine-core-verify" and r["batch"] == 2)
    assert verify["detail"]["verify_rounds"] > 0 and verify["round_per_step"] > 0
    printed = capsys.readouterr().out
    assert "| engine-api | 2 |" in printed


def test_a_failing_rung_is_recorded_and_the_rest_run(monkeypatch, tmp_path):
    from engine.bench import ladder_rungs

    def broken(*args, **kwargs):
        raise ValueError("this rung broke")

    monkeypatch.setattr(ladder_rungs, "bare_verify", broken)
    out = tmp_path / "ladder.json"
    argv = ["--model", "random:tiny", "--batch", "1", "--context", "16", "--tokens", "4"]
    profile_ladder.main([*argv, "--repeats", "1", "--json", str(out)])
    rows = {r["rung"]: r for r in json.loads(out.read_text())["results"]}
    assert rows["bare-verify"]["error"] == "ValueError: this rung broke"
    assert "ms" not in rows["bare-verify"] and rows["ours-verify"]["ms"] > 0


def test_rows_whose_prompts_exceed_a_step_join_together_and_are_timed(tmp_path):
    """Six 200-token prompts are more than one CPU step prefills (512 tokens); paced in beside
    the first rows, those rows used to finish before the last joined, and the engine rungs
    found no step with every row decoding."""
    out = tmp_path / "ladder.json"
    argv = ["--model", "random:tiny", "--batch", "6", "--context", "200", "--tokens", "4"]
    only = ["--only", "engine-core", "engine-core-verify", "engine-core-ahead"]
    assert profile_ladder.main([*argv, "--repeats", "1", *only, "--json", str(out)]) == 0
    rows = {r["rung"]: r for r in json.loads(out.read_text())["results"]}
    assert [r for r in rows.values() if r.get("error")] == []
    assert rows["engine-core"]["detail"]["steps"] >= 4
    assert rows["engine-core-verify"]["detail"]["tokens_per_round"] > 1
