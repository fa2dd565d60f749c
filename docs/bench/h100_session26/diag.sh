#!/usr/bin/env bash
# Session 26, third call: long ragged prompts, plain, three ways (long_diag.py), 8B.
. "$(dirname "$0")/preamble.sh"
el installed
timeout 200 python3 .gpu/x/long_diag.py .gpu/x/old_vac.py $OUT/diag.json 2048 128 4 > $OUT/diag.log 2>&1
el "diag rc=$?"; grep -E "^\{|MISMATCH" $OUT/diag.log | cut -c1-900
true
