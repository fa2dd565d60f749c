#!/usr/bin/env bash
# Session 26, fourth call: per call with cold caches (cold_check.py).
. "$(dirname "$0")/preamble.sh"
el installed
timeout 150 python3 .gpu/x/cold_check.py $OUT/cold.json > $OUT/cold.log 2>&1
el "cold rc=$?"; cut -c1-400 $OUT/cold.log
true
