#!/usr/bin/env bash
# Session 18, first call: the 8B's bare forward and plain step at batch sizes 1-8 and 16 (would
# padding a decode step of 2-5 rows pay on CUDA?), one row's forward over 1-8 tokens (would a
# verify round at batch 1 pay to widen k+1 = 5 to 6?), then the long prompt beside three running
# chats on the 8B (both targets: the running chats' p99 gap and the long prompt's own first token).
# Copy with ../h100_session16/preamble.sh.
. "$(dirname "$0")/preamble.sh"
el installed
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 python3 -m engine.bench.profile_ladder --model random:8b --batch 1 2 3 4 5 6 7 8 16 --context 256 \
  --tokens 32 --repeats 3 --only bare-forward engine-core --json $OUT/pad_rows_8b.json > $OUT/pad_rows_8b.log 2>&1
el "pad rows rc=$?"; grep "^| [a-z]" $OUT/pad_rows_8b.log
# one row's forward over 1-9 tokens (a verify round's width at batch 1 is k+1), alternated
timeout 120 python3 -m engine.bench.shape_cost --model random:8b --context 256 \
  --chunks 1 4 5 6 8 1 4 5 6 8 1 4 5 6 8 1 4 5 6 8 --json $OUT/width_8b.json > $OUT/width_8b.log 2>&1
el "width rc=$?"; grep "^| [0-9]" $OUT/width_8b.log
timeout 240 python3 -m engine.bench --model random:8b --workload long-prompt --json $OUT/lp8b.json > $OUT/lp8b.log 2>&1
el "lp8b rc=$?"; grep -iE "gap|first token|c=" $OUT/lp8b.log | cut -c1-200
true
