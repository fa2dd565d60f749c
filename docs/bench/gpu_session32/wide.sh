#!/usr/bin/env bash
# Session 32: where a wide forward's time goes (wide_probe.py, 8B), then the engine's round at
# 4 and 16 rows against the bare forward (profile_ladder) on the same machine.
. "$(dirname "$0")/preamble.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 240 python3 "$(dirname "$0")/wide_probe.py" --model random:8b --json $OUT/wide2_8b.json \
  > $OUT/wide2_8b.log 2>&1
el "probe rc=$?"; grep "^|" $OUT/wide2_8b.log | grep -v "mlx\|skipped"
timeout 200 python3 -m engine.bench.profile_ladder --model random:8b --batch 4 16 --context 256 \
  --tokens 32 --repeats 2 --only bare-forward engine-core engine-core-ahead \
  --json $OUT/ladder2_8b.json > $OUT/ladder2_8b.log 2>&1
el "ladder rc=$?"; tail -8 $OUT/ladder2_8b.log | cut -c1-200
true
