#!/usr/bin/env bash
# Session 25, fourth call: where the 1B's plain step goes at 4, 8 and 16 rows (the engine's step
# read 4.6 / 5.3 / 4.2 ms in plain.sh). Copy with ../h100_session16/preamble.sh.
. "$(dirname "$0")/preamble.sh"
el installed
timeout 300 python3 -m engine.bench.profile_ladder --model random:1b --batch 4 8 16 --tokens 128 \
  --repeats 3 --only bare-forward ours-cache-equal ours-cache-ragged engine-core engine-api \
  --json $OUT/ladder1b.json > $OUT/ladder1b.log 2>&1
el "ladder rc=$?"; grep "^|" $OUT/ladder1b.log | tail -18
true
