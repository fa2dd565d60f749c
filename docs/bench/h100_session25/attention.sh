#!/usr/bin/env bash
# Session 25: the ragged plain step's attention, measured / kernel / MLX, in one process each
# for the random 1B and 8B (attention_ab.py). Copy with ../h100_session16/preamble.sh.
. "$(dirname "$0")/preamble.sh"
el installed
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 250 python3 .gpu/x/attention_ab.py random:1b $OUT/ab1b.json 128 4 8 16 > $OUT/ab1b.log 2>&1
el "1b rc=$?"; grep "^{" $OUT/ab1b.log | cut -c1-600
timeout 250 python3 .gpu/x/attention_ab.py random:8b $OUT/ab8b.json 128 4 8 16 > $OUT/ab8b.log 2>&1
el "8b rc=$?"; grep "^{" $OUT/ab8b.log | cut -c1-600
grep -c MISMATCH $OUT/ab1b.log $OUT/ab8b.log
true
