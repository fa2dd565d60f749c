#!/usr/bin/env bash
# Session 31, planned for an H200 and not run (both starts refused): one chat, plain, seven
# alternated runs each (8B, 1B); then prompt lookup k=4 and auto on chat at 1 and 4 chats (8B).
. "$(dirname "$0")/preamble.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 130 python3 -m engine.bench --model random:8b --concurrency 1 --max-tokens 128 --repeats 7 \
  --json $OUT/one8b.json > $OUT/one8b.log 2>&1
el "8b rc=$?"; grep "^c=" $OUT/one8b.log | cut -c1-230
timeout 80 python3 -m engine.bench --model random:1b --concurrency 1 --max-tokens 128 --repeats 7 \
  --json $OUT/one1b.json > $OUT/one1b.log 2>&1
el "1b rc=$?"; grep "^c=" $OUT/one1b.log | cut -c1-230
for m in lookup auto; do
timeout 120 python3 -m engine.bench --model random:8b --speculative $m --draft-tokens 4 --concurrency 1 4 \
  --max-tokens 64 --repeats 3 --json $OUT/${m}8b.json > $OUT/${m}8b.log 2>&1
el "$m rc=$?"; grep "^c=" $OUT/${m}8b.log | cut -c1-230
done
true
