#!/usr/bin/env bash
# Session 32, first call: on an H200, one chat with seven alternated runs (8B, 1B); on any card,
# MLX's matmul by row count up to the 80 rows of a 16-row verify round (is the wide forward's
# cost the matmuls?).
. "$(dirname "$0")/preamble.sh"
card=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$card"
timeout 150 python3 -m engine.bench.matmul_check --quick --repeats 5 \
  --rows 1 5 8 16 20 32 48 64 80 96 128 160 --json $OUT/matmul_rows.json > $OUT/matmul_rows.log 2>&1
el "matmul rc=$?"
python3 - <<'PY'
import json, os, collections
d = json.load(open(os.environ["OUT"] + "/matmul_rows.json"))
cases = d["cases"] if isinstance(d, dict) and "cases" in d else d
per = collections.defaultdict(dict)
for c in cases:
    if c.get("mlx_ms") is not None:
        per[c["rows"]][(c["k"], c["n"])] = c["mlx_ms"]
# the 8B's step: q, o (4096x4096), k, v (4096x1024), gate, up (4096x14336), down, x 32 + output
w = {(4096, 4096): 2, (4096, 1024): 2, (4096, 14336): 2, (14336, 4096): 1}
for rows in sorted(per):
    p = per[rows]
    if all(s in p for s in w) and (4096, 49152) in p:
        step = 32 * sum(p[s] * m for s, m in w.items()) + p[(4096, 49152)]
        print(f"rows {rows:4d}: 8B matmuls {step:6.2f} ms/step")
PY
if echo "$card" | grep -q H200; then bash "$(dirname "$0")/h200one.sh"; fi
true
