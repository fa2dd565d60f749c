#!/usr/bin/env bash
# Session 31, planned for an H200 and not run (both starts refused): synthetic speculation
# k=4 p=0.9 at 1, 4, 16 chats (8B), and the verify round at 16 rows by rung (profile_ladder).
. "$(dirname "$0")/preamble.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 190 python3 -m engine.bench --model random:8b --speculative synthetic --acceptance 0.9 \
  --draft-tokens 4 --concurrency 1 4 16 --max-tokens 128 --repeats 3 --json $OUT/syn8b.json > $OUT/syn8b.log 2>&1
el "syn8b rc=$?"; grep "^c=" $OUT/syn8b.log | cut -c1-220
timeout 200 python3 -m engine.bench.profile_ladder --model random:8b --batch 1 16 --context 256 \
  --tokens 32 --repeats 2 --only bare-forward bare-verify engine-core engine-core-verify \
  engine-core-ahead --json $OUT/ladder8b.json > $OUT/ladder8b.log 2>&1
el "ladder rc=$?"; tail -16 $OUT/ladder8b.log | cut -c1-200
true
