#!/usr/bin/env bash
# Next device session: would padding a decode step of 2-5 rows to 6 pay on CUDA? cuBLASLt's
# matmuls for 2-5 rows cost more than for 6-8 (docs/benchmarks.md, eleventh pass); this times
# the 8B's whole bare forward (attention and the padding rows' own work included) and our
# engine's plain step at every batch size 1-8 and 16, in one process. If 6 rows step faster than
# 3-5, dummy rows in the decode batch are worth building. Copy with ../h100_session16/preamble.sh.
. "$(dirname "$0")/preamble.sh"
el installed
timeout 240 python3 -m engine.bench.profile_ladder --model random:8b --batch 1 2 3 4 5 6 7 8 16 --context 256 \
  --tokens 32 --repeats 3 --only bare-forward engine-core --json $OUT/pad_rows_8b.json > $OUT/pad_rows_8b.log 2>&1
el "8b rc=$?"; grep "^| [a-z]" $OUT/pad_rows_8b.log
true
