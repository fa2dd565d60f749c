"""The admission trace (engine/bench/admission_trace.py) on a tiny random model: every prompt
that arrived at once is admitted, every row gets a first token, and each step's plan adds up."""

import json

from engine.bench import admission_trace


def test_the_trace_admits_every_prompt_and_accounts_for_each_step(tmp_path, capsys):
    out = tmp_path / "trace.json"
    argv = ["--model", "random:tiny", "--concurrency", "6", "--repeats", "1"]
    assert admission_trace.main([*argv, "--prefill-chunk", "64", "--json", str(out)]) == 0

    report = json.loads(out.read_text())
    steps = report["ours_steps"]
    assert report["prefill_chunk"] == 64 and len(report["prompt_tokens"]) == 6
    assert sum(s["admit"] for s in steps) == 6 and sum(s["join"] for s in steps) == 6
    # every prompt token but each row's last (it joins as the row's first input) is prefilled
    assert sum(s["prefill_tokens"] for s in steps) == sum(report["prompt_tokens"]) - 6
    assert max(s["prefill_tokens"] for s in steps) <= 64
    assert steps[-1]["with_first_token"] == 6
    assert 0 < report["ours_all_first_s"] and 0 < report["batchgen_all_first_s"]
    assert "every row's first token" in capsys.readouterr().out


def test_long_prompts_and_the_paced_comparison(tmp_path, capsys):
    out = tmp_path / "trace.json"
    argv = ["--model", "random:tiny", "--concurrency", "4", "--repeats", "1", "--paced-too"]
    assert admission_trace.main([*argv, "--prompt-tokens", "90", "--json", str(out)]) == 0

    report = json.loads(out.read_text())
    assert report["prompt_tokens"] == [90] * 4
    for key in ("ours", "paced"):
        steps = report[f"{key}_steps"]
        assert sum(s["prefill_tokens"] for s in steps) == 4 * 89, key
        assert steps[-1]["with_first_token"] == 4
    assert len(report["paced_runs_all_first_s"]) == 1
    assert "owed their gap" in capsys.readouterr().out
