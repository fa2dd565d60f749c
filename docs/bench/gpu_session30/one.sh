#!/usr/bin/env bash
# Session 30, last call: one chat, plain, seven alternated runs each (the 8B, then the 1B).
. "$(dirname "$0")/preamble.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
for m in 8b 1b; do
timeout 200 python3 -m engine.bench --model random:$m --concurrency 1 --max-tokens 128 --repeats 7 \
  --json $OUT/one$m.json > $OUT/one$m.log 2>&1
el "$m rc=$?"; grep "^c=" $OUT/one$m.log | cut -c1-230
done
true
