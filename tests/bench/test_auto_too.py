"""`python -m engine.bench --speculative synthetic --auto-too`: each acceptance rate also runs
"auto" with the synthetic drafter as its rows' drafter (auto picks each row's k), so issue 13's
"at p=0.7 never below plain with auto" is measured on the same prompts as the fixed k."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from engine.bench.__main__ import main, parse_args
from engine.bench.result_rows import print_row
from engine.bench.spec_configs import set_mode, spec_configs
from engine.requests import SpecMethod
from engine.speculative.policy import SpeculationPolicy
from tests.bench.chart_lines import record_lines


def test_one_auto_setting_per_rate():
    argv = ["--speculative", "synthetic", "--acceptance", "0.7", "0.9", "--draft-tokens", "2", "4"]
    configs = spec_configs(parse_args([*argv, "--auto-too"]))
    fixed = [(c.draft_tokens, c.acceptance) for c in configs if c.method == SpecMethod.SYNTHETIC]
    assert fixed == [(2, 0.7), (2, 0.9), (4, 0.7), (4, 0.9)]
    auto = [c for c in configs if c.method == SpecMethod.AUTO]
    assert [c.acceptance for c in auto] == [0.7, 0.9]
    assert all(c.auto_on_synthetic for c in auto)
    assert not any(c.auto_on_synthetic for c in spec_configs(parse_args(argv)))
    # a plain "auto" run drafts with the engine's own drafters, as before
    assert not spec_configs(parse_args(["--speculative", "auto"]))[0].auto_on_synthetic


def test_auto_too_needs_the_synthetic_drafter(capsys):
    with pytest.raises(SystemExit):
        parse_args(["--speculative", "lookup", "--auto-too"])
    assert "--auto-too" in capsys.readouterr().err


def test_an_auto_row_is_labelled(capsys):
    row = {
        "concurrency": 1,
        "workload": "chat",
        "speculative": "auto",
        "draft_tokens": 4,
        "acceptance": 0.7,
        "ours_tokens_per_s": 10.0,
        "baseline_tokens_per_s": None,
        "plain_tokens_per_s": 8.0,
        "speedup_vs_plain": 1.25,
        "mean_acceptance_length": 2.0,
        "ours_mean_ttft_s": 0.1,
        "lossless": True,
    }
    print_row(row)
    assert "spec=auto(k=auto p=0.7)" in capsys.readouterr().out


def test_the_run_switches_auto_rows_to_the_synthetic_drafter_and_back():
    drafters = frozenset({"eagle", "lookup", "synthetic"})
    policy = SpeculationPolicy(own_draft="eagle", drafters=drafters)
    core = SimpleNamespace(
        policy=policy,
        executor=SimpleNamespace(
            batch=SimpleNamespace(recompute=True), ahead=SimpleNamespace(on=None, configured=None)
        ),
    )

    async def run_on_engine_thread(fn):
        return fn()

    eng = SimpleNamespace(
        _worker=SimpleNamespace(core_for=lambda: core), run_on_engine_thread=run_on_engine_thread
    )
    auto, fixed = spec_configs(parse_args(["--speculative", "synthetic", "--auto-too"]))[::-1]
    alone = frozenset({"eagle", "synthetic"})  # auto's rows draft with the synthetic drafter only
    for spec, own, available in (
        (auto, "synthetic", alone),
        (auto, "synthetic", alone),
        (fixed, "eagle", drafters),
        (None, "eagle", drafters),
    ):
        asyncio.run(set_mode(eng, spec))
        assert (policy.own_draft, policy.drafters) == (own, available)
    asyncio.run(set_mode(eng, auto))
    asyncio.run(set_mode(eng, None))
    assert (policy.own_draft, policy.drafters) == ("eagle", drafters)


def test_auto_rows_draft_with_the_synthetic_drafter(tmp_path):
    out = tmp_path / "auto.json"
    argv = ["--model", "random:tiny", "--speculative", "synthetic", "--acceptance", "0.9"]
    argv += ["--concurrency", "2", "--max-tokens", "48", "--repeats", "1", "--no-baseline"]
    assert main([*argv, "--auto-too", "--json", str(out)]) == 0
    rows = {r["speculative"]: r for r in json.loads(out.read_text())["results"]}
    assert set(rows) == {"synthetic", "auto"}
    auto = rows["auto"]
    assert auto["acceptance"] == 0.9 and auto["lossless"]
    assert auto["mean_acceptance_length"] > 1.5  # its rounds drafted the synthetic replies
    assert set(auto["rounds_by_drafter"]) == {"synthetic"}  # and nothing else


def test_the_chart_draws_auto_as_its_own_line(tmp_path, monkeypatch):
    from engine.bench.charts import speedup_chart

    drawn = record_lines(monkeypatch)
    rows = [
        {"concurrency": 1, "speculative": method, "draft_tokens": k, "acceptance": a}
        | {"verify_ahead": "default", "speedup_vs_plain": speedup}
        for method, k, speedup in (("synthetic", 4, 1.5), ("synthetic", 2, 1.2), ("auto", 4, 2.0))
        for a in (0.7, 0.9)
    ]
    assert speedup_chart(rows, tmp_path / "chart.png", title="t").exists()
    assert drawn == [("k=2", [1.2, 1.2]), ("k=4", [1.5, 1.5]), ("auto", [2.0, 2.0])]
