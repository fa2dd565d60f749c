#!/usr/bin/env bash
# Session 27, third call: the plain sweep through `python -m engine.bench` with compiled MLPs on
# by default on CUDA (random 8B and 1B, lossless checked). Copy with ../h100_session16/preamble.sh.
. "$(dirname "$0")/preamble.sh"
el installed
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 220 python3 -m engine.bench --model random:8b --concurrency 1 4 16 --max-tokens 128 \
  --repeats 3 --json $OUT/plain8b.json > $OUT/plain8b.log 2>&1
el "8b rc=$?"; grep "^c=" $OUT/plain8b.log | cut -c1-220
timeout 170 python3 -m engine.bench --model random:1b --concurrency 8 32 --max-tokens 128 \
  --repeats 3 --json $OUT/plain1b.json > $OUT/plain1b.log 2>&1
el "1b rc=$?"; grep "^c=" $OUT/plain1b.log | cut -c1-220
true
