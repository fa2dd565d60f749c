#!/usr/bin/env bash
# Session 18, fourth call: prompt chunks at an offset through MLX's unfused attention (engine/
# kernels/chunk_attention.py) against cuDNN (TANDEM_NO_CHUNK_ATTENTION=1), one process each:
# one row's forward over 16-256 tokens, each at a key length not seen before (first) and again
# at the same one; the long prompt beside three chats (8B, three turns); the multi-turn first token
# (a cached history, the new turn prefilled at an offset). Copy with ../h100_session16/preamble.sh.
. "$(dirname "$0")/preamble.sh"
el installed
for mode in unfused cudnn; do
  if [ $mode = cudnn ]; then export TANDEM_NO_CHUNK_ATTENTION=1; else unset TANDEM_NO_CHUNK_ATTENTION; fi
  timeout 100 python3 -m engine.bench.shape_cost --model random:8b --context 1000 \
    --chunks 16 16 16 64 64 64 256 256 256 --json $OUT/shape_$mode.json > $OUT/shape_$mode.log 2>&1
  el "shape $mode rc=$?"; grep "^| [0-9]" $OUT/shape_$mode.log | tr '\n' ' '; echo
  timeout 150 python3 -m engine.bench --model random:8b --workload long-prompt --repeats 3 \
    --json $OUT/lp8b_$mode.json > $OUT/lp8b_$mode.log 2>&1
  el "lp8b $mode rc=$?"; grep -iE "gap factor" $OUT/lp8b_$mode.log | cut -c1-200
done
true
