"""`python -m engine.bench.shared_step` times each way to run a step with a riding chunk, and
leaves every cache where it found it (each run sees the same positions)."""

from __future__ import annotations

import json

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
