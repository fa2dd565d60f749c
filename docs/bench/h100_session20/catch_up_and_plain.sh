#!/usr/bin/env bash
# Session 20, second experiment call: the long prompt beside three chats with every request
# drafting with a draft model (random 8B target, random 1B draft: its catch-up on the long
# prompt's history paced, engine/speculative/catch_up_pacer.py), then plain decoding against
# mlx_lm.generate and BatchGenerator at 1, 4 and 16 chats on the 8B. Copy with
# ../h100_session16/preamble.sh.
. "$(dirname "$0")/preamble.sh"
el installed
timeout 260 python3 -m engine.bench --model random:8b --draft-model random:1b --speculative draft \
  --draft-tokens 3 --workload long-prompt --repeats 2 --json $OUT/lp8b_draft.json > $OUT/lp8b_draft.log 2>&1
el "lp8b draft rc=$?"; grep -iE "gap factor" $OUT/lp8b_draft.log | cut -c1-200
timeout 220 python3 -m engine.bench --model random:8b --concurrency 1 4 16 --max-tokens 64 --repeats 3 --no-check \
  --json $OUT/plain8b.json > $OUT/plain8b.log 2>&1
el "plain8b rc=$?"; grep "^c=" $OUT/plain8b.log | cut -c1-200
true
