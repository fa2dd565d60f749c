#!/usr/bin/env bash
# Session 20, first experiment call: the long prompt beside three chats with session 19's order
# (fewest tokens left first, like widths and depths) and the pacer's mends, the 8B then the 1B,
# three turns each. Copy with ../h100_session16/preamble.sh.
. "$(dirname "$0")/preamble.sh"
el installed
timeout 150 python3 -m engine.bench --model random:8b --workload long-prompt --repeats 3 --json $OUT/lp8b.json > $OUT/lp8b.log 2>&1
el "lp8b rc=$?"; grep -iE "gap factor" $OUT/lp8b.log | cut -c1-200
timeout 90 python3 -m engine.bench --model random:1b --workload long-prompt --repeats 3 --json $OUT/lp1b.json > $OUT/lp1b.log 2>&1
el "lp1b rc=$?"; grep -iE "gap factor" $OUT/lp1b.log | cut -c1-200
true
