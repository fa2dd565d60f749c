#!/usr/bin/env bash
# Session 31, second call: auto's pricing by found drafts (session 30) on the GPU: prompt lookup
# k=4 and auto on chat at 1 and 4 chats (8B), each against plain.
. "$(dirname "$0")/preamble.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
for m in lookup auto; do
timeout 120 python3 -m engine.bench --model random:8b --speculative $m --draft-tokens 4 --concurrency 1 4 \
  --max-tokens 64 --repeats 3 --json $OUT/${m}8b.json > $OUT/${m}8b.log 2>&1
el "$m rc=$?"; grep "^c=" $OUT/${m}8b.log | cut -c1-230
done
true
