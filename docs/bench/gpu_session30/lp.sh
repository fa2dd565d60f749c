#!/usr/bin/env bash
# Session 30, on an H200: the long prompt beside three chats (8B, 1B), then prompt lookup k=4
# and auto on chat at 1 and 4 chats (8B).
. "$(dirname "$0")/preamble.sh"
el installed
timeout 200 python3 -m engine.bench --model random:8b --workload long-prompt --repeats 3 \
  --json $OUT/lp8b.json > $OUT/lp8b.log 2>&1
el "lp8b rc=$?"; grep -iE "gap|first" $OUT/lp8b.log | cut -c1-250 | tail -8
timeout 120 python3 -m engine.bench --model random:1b --workload long-prompt --repeats 3 \
  --json $OUT/lp1b.json > $OUT/lp1b.log 2>&1
el "lp1b rc=$?"; grep -iE "gap|first" $OUT/lp1b.log | cut -c1-250 | tail -8
for m in lookup auto; do
timeout 110 python3 -m engine.bench --model random:8b --speculative $m --draft-tokens 4 --concurrency 1 4 \
  --max-tokens 64 --repeats 3 --json $OUT/${m}8b.json > $OUT/${m}8b.log 2>&1
el "$m rc=$?"; grep "^c=" $OUT/${m}8b.log | cut -c1-230
done
true
