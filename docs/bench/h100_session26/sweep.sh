#!/usr/bin/env bash
# Session 26: the standard benchmark with the grouped kernel: synthetic k=4 p=0.9 on the 8B
# (against plain and BatchGenerator), then plain at 1-32 chats. Copy with
# ../h100_session16/preamble.sh into .gpu/x/.
. "$(dirname "$0")/preamble.sh"
el installed
timeout 260 python3 -m engine.bench --model random:8b --speculative synthetic --draft-tokens 4 \
  --acceptance 0.9 --concurrency 1 4 16 --max-tokens 128 --repeats 3 --json $OUT/syn8b.json > $OUT/syn8b.log 2>&1
el "syn8b rc=$?"; grep "^c=" $OUT/syn8b.log | cut -c1-260
timeout 260 python3 -m engine.bench --model random:8b --concurrency 1 4 8 16 32 --max-tokens 128 \
  --repeats 3 --json $OUT/plain8b.json > $OUT/plain8b.log 2>&1
el "plain8b rc=$?"; grep "^c=" $OUT/plain8b.log | cut -c1-260
true
