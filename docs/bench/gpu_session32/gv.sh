#!/usr/bin/env bash
# Session 32: verify attention in grouped blocks (the new default for several queries) against
# one head a block (TANDEM_PER_HEAD_VERIFY_ATTENTION=1, as before): the bare wide forward
# (wide_probe.py), then synthetic speculation in the engine (8B, k=4 p=0.9, 1 / 4 / 16 chats,
# the lossless check on), alternated processes, with the calls each way counted (va_limit.py:
# session 31's, docs/bench/gpu_session31/, copied beside this script into .gpu/x).
. "$(dirname "$0")/preamble.sh"
here="$(dirname "$0")"
nvidia-smi --query-gpu=name --format=csv,noheader
way() { if [ $1 = perhead ]; then export TANDEM_PER_HEAD_VERIFY_ATTENTION=1; else unset TANDEM_PER_HEAD_VERIFY_ATTENTION; fi; }
for g in grouped perhead; do way $g
  timeout 80 python3 "$here/wide_probe.py" --model random:8b --only-ours --repeats 3 \
    --json $OUT/wide_$g.json > $OUT/wide_$g.log 2>&1
  el "wide $g rc=$?"; grep -E "^\||^compaction" $OUT/wide_$g.log | grep -E " x 5 |compaction"
done
for i in 1 2; do for g in grouped perhead; do way $g
  timeout 150 python3 "$here/va_limit.py" engine.bench --model random:8b --speculative synthetic \
    --acceptance 0.9 --draft-tokens 4 --concurrency 1 4 16 --max-tokens 128 --repeats 1 \
    --no-baseline --json $OUT/syn_${g}_$i.json > $OUT/syn_${g}_$i.log 2>&1
  el "syn $g run $i rc=$?"; grep -E "^c=|^calls" $OUT/syn_${g}_$i.log | cut -c1-200 | head -7
done; done
true
