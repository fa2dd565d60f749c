#!/usr/bin/env bash
# Session 30 (H200): early launch (engine/core/early_launch.py): the 8B's bare forwards by launch
# interval, then the engine with and without: the 8B at 1 and 4 chats, the 1B at 1 chat.
# (The probe ran in the first call; the engine runs failed there for want of platformdirs and
# ran again in the next call with SKIP_PROBE=1.)
. "$(dirname "$0")/preamble.sh"
el installed
nvidia-smi --query-gpu=name --format=csv,noheader
[ -z "${SKIP_PROBE:-}" ] && ROUNDS=3 REPS=6 timeout 90 python3 .gpu/x/early_probe.py random:8b $OUT/probe8b.json > $OUT/probe8b.log 2>&1
el "probe rc=$?"; tail -1 $OUT/probe8b.log | cut -c1-1500
REPEATS=3 timeout 220 python3 .gpu/x/early_ab.py random:8b $OUT/ab8b.json 128 1 4 > $OUT/ab8b.log 2>&1
el "ab8b rc=$?"; grep -E "^\{|MISMATCH|Error" $OUT/ab8b.log | cut -c1-700
REPEATS=3 timeout 90 python3 .gpu/x/early_ab.py random:1b $OUT/ab1b.json 128 1 > $OUT/ab1b.log 2>&1
el "ab1b rc=$?"; grep -E "^\{|MISMATCH|Error" $OUT/ab1b.log | cut -c1-700
true
