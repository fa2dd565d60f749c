"""`python -m engine.bench.shape_cost` runs on any device and records every chunk length."""

from __future__ import annotations

import json

from engine.bench import shape_cost


def test_shape_cost_records_each_length(tmp_path):
    out = tmp_path / "shapes.json"
    assert (
        shape_cost.main(
            ["--model", "random:tiny", "--context", "40", "--chunks", "8", "16", "--json", str(out)]
        )
        == 0
    )
    rows = json.loads(out.read_text())["rows"]
    assert [r["tokens"] for r in rows] == [8, 16]
    assert all(r["first_ms"] > 0 and len(r["again_ms"]) == 2 for r in rows)
