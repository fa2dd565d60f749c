#!/usr/bin/env bash
# Session 28, third call: decoder layers launched early (engine/core/early_launch.py): the 8B's
# bare forwards by launch interval (early_probe.py), then the engine with and without
# (early_ab.py): the 8B at 1 and 4 chats, the 1B at 1 and 4.
. "$(dirname "$0")/preamble.sh"
el installed
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 120 python3 .gpu/x/early_probe.py random:8b $OUT/probe8b.json > $OUT/probe8b.log 2>&1
el "probe rc=$?"; tail -1 $OUT/probe8b.log | cut -c1-1500
REPEATS=3 timeout 220 python3 .gpu/x/early_ab.py random:8b $OUT/ab8b.json 128 1 4 > $OUT/ab8b.log 2>&1
el "ab8b rc=$?"; grep -E "^\{|MISMATCH|Error" $OUT/ab8b.log | cut -c1-700
REPEATS=3 timeout 150 python3 .gpu/x/early_ab.py random:1b $OUT/ab1b.json 128 1 4 > $OUT/ab1b.log 2>&1
el "ab1b rc=$?"; grep -E "^\{|MISMATCH|Error" $OUT/ab1b.log | cut -c1-700
true
