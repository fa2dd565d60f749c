#!/usr/bin/env bash
# Session 30: the standard sweep on an H200 (early launch off, as shipped).
. "$(dirname "$0")/preamble.sh"
el installed
timeout 200 python3 -m engine.bench --model random:8b --concurrency 1 4 16 --max-tokens 128 \
  --repeats 3 --json $OUT/plain8b.json > $OUT/plain8b.log 2>&1
el "8b rc=$?"; grep "^c=" $OUT/plain8b.log | cut -c1-220
timeout 190 python3 -m engine.bench --model random:8b --speculative synthetic --acceptance 0.9 \
  --draft-tokens 4 --concurrency 1 4 16 --max-tokens 128 --repeats 3 --json $OUT/syn8b.json > $OUT/syn8b.log 2>&1
el "syn8b rc=$?"; grep "^c=" $OUT/syn8b.log | cut -c1-220
timeout 170 python3 -m engine.bench --model random:1b --concurrency 8 32 --max-tokens 128 \
  --repeats 3 --json $OUT/plain1b.json > $OUT/plain1b.log 2>&1
el "1b rc=$?"; grep "^c=" $OUT/plain1b.log | cut -c1-220
true
