#!/usr/bin/env bash
# Session 16, call 3 (same machine): the 8B's plain steps against BatchGenerator and the 1B's
# synthetic rounds (ahead and serial) with command buffers as shipped, at 400 ops and one per forward.
. "$(dirname "$0")/preamble.sh"
for ops in shipped 400 100000; do
  buffers $ops
  timeout 110 python3 -m engine.bench --model random:8b --concurrency 4 16 --max-tokens 64 --repeats 2 --no-check \
    --json $OUT/plain8b_ops$ops.json > $OUT/plain8b_ops$ops.log 2>&1
  el "plain8b ops=$ops rc=$?"; grep "^c=" $OUT/plain8b_ops$ops.log
  timeout 75 python3 -m engine.bench --model random:1b --speculative synthetic --acceptance 0.9 --draft-tokens 4 \
    --concurrency 1 4 16 --max-tokens 48 --repeats 2 --no-baseline --no-check --serial-too --json $OUT/syn1b_ops$ops.json > $OUT/syn1b_ops$ops.log 2>&1
  el "syn1b ops=$ops rc=$?"; grep "^c=" $OUT/syn1b_ops$ops.log
done
true
