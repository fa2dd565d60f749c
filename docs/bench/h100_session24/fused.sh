#!/usr/bin/env bash
# Session 24: sibling projections fused against apart, alternated in one process (8B, 1B), then
# the standard benchmark (synthetic k=4 p=0.9 with plain and BatchGenerator) on the 8B. Copy with
# ../h100_session16/preamble.sh and fused_ab.py into .gpu/x/.
. "$(dirname "$0")/preamble.sh"
el installed
for m in 8b 1b; do
  timeout 170 python3 .gpu/x/fused_ab.py random:$m $OUT/fab_$m.json 1 4 16 > $OUT/fab_$m.log 2>&1
  el "fab $m rc=$?"; grep -E "^\{|MISMATCH|share" $OUT/fab_$m.log | cut -c1-400
done
timeout 230 python3 -m engine.bench --model random:8b --speculative synthetic --draft-tokens 4 \
  --acceptance 0.9 --concurrency 1 4 16 --max-tokens 64 --repeats 3 --json $OUT/syn8b.json > $OUT/syn8b.log 2>&1
el "syn8b rc=$?"; grep "^c=" $OUT/syn8b.log | cut -c1-260
true
