#!/usr/bin/env bash
# Session 26, second call: the final code (grouped layout for groups of 2-4 heads, the per-head
# layout otherwise, limits per layout) per call against MLX (attention_check), then in the
# engine against the old kernel with long ragged prompts (grouped_ab.py with LONG), 8B.
. "$(dirname "$0")/preamble.sh"
el installed
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 120 python3 -m engine.bench.attention_check --batches 1 4 16 32 --queries 1 5 9 \
  --keys 256 1024 4096 --dtypes bfloat16 --repeats 10 --json $OUT/acheck.json > $OUT/acheck.log 2>&1
el "acheck rc=$?"; tail -2 $OUT/acheck.log | cut -c1-300
LONG=2048 timeout 300 python3 .gpu/x/grouped_ab.py random:8b .gpu/x/old_vac.py $OUT/gab8b_long.json 64 16 4 > $OUT/gab8b_long.log 2>&1
el "8b long rc=$?"; grep -E "^\{|MISMATCH" $OUT/gab8b_long.log | cut -c1-500
true
