"""The part timing (engine/bench/part_timing.py): a benchmark run on a tiny random model times
each engine part at each batch size, counts evaluations inside the parts that ran them, and puts
every wrapped function back afterwards."""

import json

import mlx.core as mx

from engine.bench import part_timing
from engine.core.batch import DecodeBatch
from engine.core.executor import ModelExecutor


def test_a_speculative_run_is_timed_part_by_part(tmp_path, capsys):
    originals = (DecodeBatch.verify_launch, ModelExecutor._verify_round, mx.eval, mx.async_eval)
    out, parts = tmp_path / "bench.json", tmp_path / "parts.json"
    argv = ["--model", "random:tiny", "--concurrency", "2", "--max-tokens", "12", "--repeats", "1"]
    argv += ["--no-baseline", "--no-check", "--speculative", "synthetic", "--acceptance", "0.9"]
    assert part_timing.main([*argv, "--json", str(out), "--parts-json", str(parts)]) == 0

    rows = json.loads(parts.read_text())
    by_part = {(r["part"], r["batch"]): r for r in rows}
    assert ("DecodeBatch.verify_launch", 2) in by_part and ("ModelExecutor.execute", 2) in by_part
    for r in rows:
        assert r["calls"] >= part_timing.DEFAULT_MIN_SAMPLES
        assert 0 <= r["eval_median_ms"] <= r["median_ms"] + 1e-9 and r["median_ms"] <= r["p90_ms"]
    # a round contains its launch; the launch queues its forward (async_eval)
    launch, round_ = (
        by_part[("DecodeBatch.verify_launch", 2)],
        by_part[("ModelExecutor._verify_round", 2)],
    )
    assert launch["median_ms"] <= round_["median_ms"] and launch["eval_median_ms"] > 0
    assert "DecodeBatch.verify_launch" in capsys.readouterr().out
    assert originals == (
        DecodeBatch.verify_launch,
        ModelExecutor._verify_round,
        mx.eval,
        mx.async_eval,
    )


def test_an_evaluation_counts_for_every_part_around_it():
    class Outer:
        def run(self):
            return Inner().run()

    class Inner:
        def run(self):
            mx.eval(mx.ones(4) * 2)
            return 1

    timer = part_timing.PartTimer(parts=((Outer, "run"), (Inner, "run")))
    timer.install()
    try:
        for _ in range(3):
            assert Outer().run() == 1
    finally:
        timer.uninstall()
    rows = {r.part: r for r in timer.table()}
    assert rows["Outer.run"].eval_median_ms > 0 and rows["Inner.run"].eval_median_ms > 0
    assert rows["Outer.run"].median_ms >= rows["Inner.run"].median_ms * 0.5
    assert rows["Outer.run"].batch == 0
