#!/usr/bin/env bash
# Session 25, second call: as attention.sh with MLX's ops chosen only where 5% faster
# (DEFAULT_MLX_MARGIN), 256 tokens a row. Copy with ../h100_session16/preamble.sh.
. "$(dirname "$0")/preamble.sh"
el installed
nvidia-smi --query-gpu=name --format=csv,noheader
for m in 8b 1b; do
  timeout 280 python3 .gpu/x/attention_ab.py random:$m $OUT/again$m.json 256 4 8 16 > $OUT/again$m.log 2>&1
  el "$m rc=$?"; grep "^{" $OUT/again$m.log | cut -c1-420
done
grep -c MISMATCH $OUT/again*.log
true
