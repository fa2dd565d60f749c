#!/usr/bin/env bash
# Session 24, second call: with sibling projections fused (the default now), plain decoding on
# the 8B against BatchGenerator as shipped (apart) at 4-32 chats, then the long prompt beside
# three chats on the 8B. Copy with ../h100_session16/preamble.sh into .gpu/x/.
. "$(dirname "$0")/preamble.sh"
el installed
timeout 300 python3 -m engine.bench --model random:8b --concurrency 1 4 8 16 32 --max-tokens 64 \
  --repeats 3 --json $OUT/plain8b.json > $OUT/plain8b.log 2>&1
el "plain8b rc=$?"; grep "^c=" $OUT/plain8b.log | cut -c1-230
timeout 200 python3 -m engine.bench --model random:8b --workload long-prompt --repeats 3 \
  --json $OUT/lp8b.json > $OUT/lp8b.log 2>&1
el "lp8b rc=$?"; grep -iE "gap factor" $OUT/lp8b.log | cut -c1-200
true
