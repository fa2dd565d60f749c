"""`python -m engine.bench --ahead-modes` and `--serial-too`: each speculative setting runs with
verify rounds as measured, always ahead or always in series, alternated in one process, and the
rows say which is which and what the measured choice picked."""

from __future__ import annotations

import json

from engine.bench.__main__ import main, parse_args
from engine.bench.result_rows import print_row
from engine.bench.spec_configs import spec_configs
from tests.bench.chart_lines import record_lines


def test_each_setting_runs_every_mode_asked():
    args = parse_args(["--speculative", "synthetic", "--ahead-modes", "measured", "on", "off"])
    assert [c.ahead for c in spec_configs(args)] == ["measured", "on", "off"]
    serial_too = parse_args(["--speculative", "lookup", "--serial-too"])
    assert [c.ahead for c in spec_configs(serial_too)] == ["on", "off"]  # as before: both fixed
    assert [c.ahead for c in spec_configs(parse_args(["--speculative", "lookup"]))] == ["default"]


def test_rows_are_labelled_by_mode(capsys):
    row = {
        "concurrency": 1,
        "workload": "chat",
        "speculative": "synthetic",
        "draft_tokens": 4,
        "acceptance": 0.9,
        "ours_tokens_per_s": 10.0,
        "baseline_tokens_per_s": None,
        "plain_tokens_per_s": 8.0,
        "speedup_vs_plain": 1.25,
        "mean_acceptance_length": 3.0,
        "ours_mean_ttft_s": 0.1,
        "lossless": True,
    }
    for mode, label in (("measured", " measured"), ("on", " ahead"), ("off", " serial")):
        print_row({**row, "verify_ahead": mode})
        assert f"synthetic(k=4 p=0.9{label})" in capsys.readouterr().out
    print_row({**row, "verify_ahead": "default"})
    assert "synthetic(k=4 p=0.9)" in capsys.readouterr().out


def test_a_measured_run_reports_its_choice(tmp_path):
    out = tmp_path / "modes.json"
    argv = ["--model", "random:tiny", "--speculative", "synthetic", "--acceptance", "0.9"]
    argv += ["--concurrency", "2", "--max-tokens", "48", "--repeats", "1", "--no-baseline"]
    assert main([*argv, "--ahead-modes", "measured", "off", "--json", str(out)]) == 0
    rows = {r["verify_ahead"]: r for r in json.loads(out.read_text())["results"]}
    assert set(rows) == {"measured", "off"}
    assert all(r["lossless"] for r in rows.values())
    choice = rows["measured"]["ahead_choice"]
    assert choice and all(set(c) >= {"ahead", "serial_ms_per_token"} for c in choice.values())
    assert "ahead_choice" not in rows["off"]


def test_the_speedup_chart_draws_the_sweeps_first_mode(tmp_path, monkeypatch):
    """One line per k: rows of the other modes at the same points would zigzag it."""
    from engine.bench.charts import speedup_chart

    drawn = record_lines(monkeypatch)
    rows = [
        {
            "concurrency": 4,
            "draft_tokens": 4,
            "acceptance": a,
            "verify_ahead": mode,
            "speedup_vs_plain": s,
        }
        for a in (0.7, 0.9)
        for mode, s in (("measured", 2.0 + a), ("on", 1.0), ("off", 1.5))
    ]
    assert speedup_chart(rows, tmp_path / "chart.png", title="t").exists()
    assert [ys for _, ys in drawn] == [[2.7, 2.9]]
