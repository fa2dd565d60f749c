#!/usr/bin/env bash
# Session 27, first call: the skinny kernel's host cost with mx.compile and a 5-token forward's
# cost by way (skinny_probe.py), the engine with compiled MLPs against as it is (compiled_ab.py:
# the 8B at 1 and 4 chats, the 1B at 8 and 32), then session 26's cold check. Copy this
# folder's files with ../h100_session16/preamble.sh into .gpu/x/.
. "$(dirname "$0")/preamble.sh"
el installed
nvidia-smi --query-gpu=name --format=csv,noheader
ROUNDS=4 FORWARDS=8 timeout 170 python3 .gpu/x/skinny_probe.py $OUT/probe.json > $OUT/probe.log 2>&1
el "probe rc=$?"; grep -v "^ " $OUT/probe.log | cut -c1-600 | tail -8
timeout 200 python3 .gpu/x/compiled_ab.py random:8b $OUT/ab8b.json 128 1 4 > $OUT/ab8b.log 2>&1
el "ab8b rc=$?"; grep -E "^\{|MISMATCH|Error" $OUT/ab8b.log | cut -c1-700
timeout 140 python3 .gpu/x/compiled_ab.py random:1b $OUT/ab1b.json 128 8 32 > $OUT/ab1b.log 2>&1
el "ab1b rc=$?"; grep -E "^\{|MISMATCH|Error" $OUT/ab1b.log | cut -c1-700
timeout 60 python3 .gpu/x/cold_check.py $OUT/cold.json > $OUT/cold.log 2>&1
el "cold rc=$?"; cut -c1-300 $OUT/cold.log | tail -15
true
