#!/usr/bin/env bash
# Session 31, first call: one chat, plain, seven alternated runs each (the 8B, then the 1B); then
# where the 8B's verify round goes at 1 and 16 rows (profile_ladder).
. "$(dirname "$0")/preamble.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 130 python3 -m engine.bench --model random:8b --concurrency 1 --max-tokens 128 --repeats 7 \
  --json $OUT/one8b.json > $OUT/one8b.log 2>&1
el "8b rc=$?"; grep "^c=" $OUT/one8b.log | cut -c1-230
timeout 80 python3 -m engine.bench --model random:1b --concurrency 1 --max-tokens 128 --repeats 7 \
  --json $OUT/one1b.json > $OUT/one1b.log 2>&1
el "1b rc=$?"; grep "^c=" $OUT/one1b.log | cut -c1-230
timeout 220 python3 -m engine.bench.profile_ladder --model random:8b --batch 1 16 --context 256 \
  --tokens 32 --repeats 2 --only bare-forward bare-verify ours-verify engine-core engine-core-verify \
  engine-core-ahead --json $OUT/ladder8b.json > $OUT/ladder8b.log 2>&1
el "ladder rc=$?"; tail -24 $OUT/ladder8b.log | cut -c1-200
true
