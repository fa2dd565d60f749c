#!/usr/bin/env bash
# Session 28, third call: decoder layers launched early (engine/core/early_launch.py): the 8B's
# bare forwards by launch interval (early_probe.py), then the engine with and without
# (early_ab.py): the 8B and the 1B at one chat.
. "$(dirname "$0")/preamble.sh"
el installed
nvidia-smi --query-gpu=name --format=csv,noheader
ROUNDS=3 REPS=6 timeout 90 python3 .gpu/x/early_probe.py random:8b $OUT/probe8b.json > $OUT/probe8b.log 2>&1
el "probe rc=$?"; tail -1 $OUT/probe8b.log | cut -c1-1500
REPEATS=3 timeout 110 python3 .gpu/x/early_ab.py random:8b $OUT/ab8b.json 128 1 > $OUT/ab8b.log 2>&1
el "ab8b rc=$?"; grep -E "^\{|MISMATCH|Error" $OUT/ab8b.log | cut -c1-700
REPEATS=3 timeout 60 python3 .gpu/x/early_ab.py random:1b $OUT/ab1b.json 128 1 > $OUT/ab1b.log 2>&1
el "ab1b rc=$?"; grep -E "^\{|MISMATCH|Error" $OUT/ab1b.log | cut -c1-700
true
