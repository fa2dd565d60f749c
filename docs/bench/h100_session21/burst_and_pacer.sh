#!/usr/bin/env bash
# Session 21, first experiment call: a burst of 16 prompts of 256 tokens on the random 8B, ours
# (the burst's rows not owed their gap, engine/core/scheduler.py `burst_s`) against
# BatchGenerator and against ours with every row owed its gap (as before), alternated; then
# session 19's long prompt beside three chats on the 8B and the 1B (../h100_session19/pacer.sh).
# Copy with ../h100_session16/preamble.sh and ../h100_session19/pacer.sh into .gpu/x/.
. "$(dirname "$0")/preamble.sh"
el installed
timeout 120 python3 -m engine.bench.admission_trace --model random:8b --concurrency 16 \
  --prompt-tokens 256 --repeats 3 --paced-too --json $OUT/burst8b.json > $OUT/burst8b.log 2>&1
el "burst8b rc=$?"; grep -E "first token|owed" $OUT/burst8b.log | cut -c1-200
bash "$(dirname "$0")/pacer.sh"
