#!/usr/bin/env bash
# Session 18, third call: the long prompt beside three chats on the 8B and the 1B, four turns
# each with every turn's paced steps traced (the first call's two turns disagreed: 9.4x and 2.3x
# gap, 8.5x and 1.16x first token), then plain decoding against BatchGenerator at 4 and 16 chats
# on the 8B. Copy with ../h100_session16/preamble.sh.
. "$(dirname "$0")/preamble.sh"
el installed
timeout 200 python3 -m engine.bench --model random:8b --workload long-prompt --repeats 4 --json $OUT/lp8b.json > $OUT/lp8b.log 2>&1
el "lp8b rc=$?"; grep -iE "gap factor" $OUT/lp8b.log | cut -c1-200
timeout 150 python3 -m engine.bench --model random:1b --workload long-prompt --repeats 4 --json $OUT/lp1b.json > $OUT/lp1b.log 2>&1
el "lp1b rc=$?"; grep -iE "gap factor" $OUT/lp1b.log | cut -c1-200
timeout 200 python3 -m engine.bench --model random:8b --concurrency 4 16 --max-tokens 64 --repeats 3 --no-check \
  --json $OUT/plain8b.json > $OUT/plain8b.log 2>&1
el "plain8b rc=$?"; grep "^c=" $OUT/plain8b.log | cut -c1-200
true
