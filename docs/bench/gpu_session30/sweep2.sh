#!/usr/bin/env bash
# Session 30: the rest of the standard sweep on an H200: the 8B plain at 8 and 32, the 1B at 1, 4, 16.
. "$(dirname "$0")/preamble.sh"
timeout 150 python3 -m engine.bench --model random:8b --concurrency 8 32 --max-tokens 128 --repeats 3 \
  --json $OUT/plain8b_2.json > $OUT/plain8b_2.log 2>&1
el "8b rc=$?"; grep "^c=" $OUT/plain8b_2.log | cut -c1-220
timeout 120 python3 -m engine.bench --model random:1b --concurrency 1 4 16 --max-tokens 128 --repeats 3 \
  --json $OUT/plain1b_2.json > $OUT/plain1b_2.log 2>&1
el "1b rc=$?"; grep "^c=" $OUT/plain1b_2.log | cut -c1-220
true
