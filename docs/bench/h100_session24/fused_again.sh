#!/usr/bin/env bash
# Session 24, third call: fused against apart again, the 8B at 4 and 16 chats (call 4 read plain
# 0.895x at four) and the Qwen3.5-shaped hybrid 1B (its linear attention's four input
# projections as one group). Copy with ../h100_session16/preamble.sh and fused_ab.py.
. "$(dirname "$0")/preamble.sh"
el installed
timeout 200 python3 .gpu/x/fused_ab.py random:8b $OUT/fab2_8b.json 4 16 > $OUT/fab2_8b.log 2>&1
el "fab2 8b rc=$?"; grep -E "^\{|MISMATCH|share" $OUT/fab2_8b.log | cut -c1-400
timeout 240 python3 .gpu/x/fused_ab.py random:hybrid-1b $OUT/fab_hyb.json 1 4 16 > $OUT/fab_hyb.log 2>&1
el "fab hybrid rc=$?"; grep -E "^\{|MISMATCH|share|Error" $OUT/fab_hyb.log | cut -c1-400
true
