#!/usr/bin/env bash
# Session 16, the short form of ladder_commits.sh for a call with little device time left: the
# 1B's ladder at 1 and 4 rows, command buffers as shipped and one per forward.
. "$(dirname "$0")/preamble.sh"
el installed
for ops in shipped 100000; do
  buffers $ops
  timeout ${LADDER_S:-100} python3 -m engine.bench.profile_ladder --model random:1b --batch 1 4 --context 256 --tokens 32 \
    --repeats 2 --only bare-forward engine-core engine-core-verify engine-core-ahead \
    --json $OUT/ladder_1b_ops$ops.json > $OUT/ladder_1b_ops$ops.log 2>&1
  el "ladder ops=$ops rc=$?"; grep "^| [a-z]" $OUT/ladder_1b_ops$ops.log | tail -10
done
true
