#!/usr/bin/env bash
# Session 18, sixth call: what a step with a prompt chunk costs the 8B at shapes already seen
# (python -m engine.bench.shared_step: every cache trimmed back after each run) - the decode
# step alone, the chunk alone, both in forwards of their own, both in one shared forward - since
# the long-prompt runs' steps with 16-token chunks took 35-45 ms against a 15-17 ms decode step.
# Copy with ../h100_session16/preamble.sh.
. "$(dirname "$0")/preamble.sh"
el installed
timeout 200 python3 -m engine.bench.shared_step --model random:8b --rows 3 --chunks 16 64 256 512 \
  --repeats 7 --json $OUT/shared_step_8b.json > $OUT/shared_step_8b.log 2>&1
el "shared step rc=$?"; tail -12 $OUT/shared_step_8b.log | cut -c1-160
true
