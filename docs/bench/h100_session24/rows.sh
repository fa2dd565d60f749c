#!/usr/bin/env bash
# Session 24, fifth call: the bare forward (mlx-lm's KVCache, no engine) at 1-8 rows and 16, fused
# and apart, the 1B then the 8B: is a step of 4 rows dearer than one of 8 (call 10: the 1B's
# engine step 5.9 ms at 4 rows, 3.9 at 8)? Copy with ../h100_session16/preamble.sh, fuse_probe.py.
. "$(dirname "$0")/preamble.sh"
el installed
for m in 1b 8b; do
  timeout 200 python3 .gpu/x/fuse_probe.py random:$m $OUT/rows_$m.json 1 2 3 4 5 6 7 8 16 > $OUT/rows_$m.log 2>&1
  el "rows $m rc=$?"; grep -E "fused/base" $OUT/rows_$m.log
done
true
