#!/usr/bin/env bash
# Session 19 (planned in session 18 as its seventh call): the long prompt beside three chats with the pacer's two mends (on CUDA
# the budget itself moves, not the power of two a step took; each chunk size priced by the median
# of its latest steps), the 8B then the 1B, three turns each. Copy with ../h100_session16/preamble.sh. Session 19 adds to the JSON the chat turns' waits (random models rarely end a reply, so expect none).
# Still waiting in session 20, its timeouts raised to 150 s and 90 s (three configs of three turns each).
. "$(dirname "$0")/preamble.sh"
el installed
timeout 150 python3 -m engine.bench --model random:8b --workload long-prompt --repeats 3 --json $OUT/lp8b.json > $OUT/lp8b.log 2>&1
el "lp8b rc=$?"; grep -iE "gap factor" $OUT/lp8b.log | cut -c1-200
timeout 90 python3 -m engine.bench --model random:1b --workload long-prompt --repeats 3 --json $OUT/lp1b.json > $OUT/lp1b.log 2>&1
el "lp1b rc=$?"; grep -iE "gap factor" $OUT/lp1b.log | cut -c1-200
true
