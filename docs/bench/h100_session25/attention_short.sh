#!/usr/bin/env bash
# Session 25, fifth call: attention.sh's 8B runs again (128 tokens a row) with the trial that
# ends after four legs where the kernel leads. Copy with ../h100_session16/preamble.sh.
. "$(dirname "$0")/preamble.sh"
el installed
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 python3 .gpu/x/attention_ab.py random:8b $OUT/short8b.json 128 4 8 16 > $OUT/short8b.log 2>&1
el "8b rc=$?"; grep "^{" $OUT/short8b.log | cut -c1-420
grep -c MISMATCH $OUT/short8b.log
true
