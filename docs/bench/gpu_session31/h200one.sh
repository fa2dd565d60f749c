#!/usr/bin/env bash
# Session 31, last call, on an H200: one chat, plain, seven alternated runs each (8B, 1B).
. "$(dirname "$0")/preamble.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 130 python3 -m engine.bench --model random:8b --concurrency 1 --max-tokens 128 --repeats 7 \
  --json $OUT/one8b.json > $OUT/one8b.log 2>&1
el "8b rc=$?"; grep "^c=" $OUT/one8b.log | cut -c1-230
timeout 80 python3 -m engine.bench --model random:1b --concurrency 1 --max-tokens 128 --repeats 7 \
  --json $OUT/one1b.json > $OUT/one1b.log 2>&1
el "1b rc=$?"; grep "^c=" $OUT/one1b.log | cut -c1-230
true
