#!/usr/bin/env bash
# Session 25, third call: the plain sweep through `python -m engine.bench` with the measured
# decode-attention choice as shipped (random 8B and 1B, 1 to 32 chats, lossless checked).
# Copy with ../h100_session16/preamble.sh.
. "$(dirname "$0")/preamble.sh"
el installed
nvidia-smi --query-gpu=name --format=csv,noheader
for m in 8b 1b; do
  timeout 270 python3 -m engine.bench --model random:$m --concurrency 1 4 8 16 32 --max-tokens 128 \
    --repeats 3 --json $OUT/plain$m.json > $OUT/plain$m.log 2>&1
  el "$m rc=$?"; grep "^c=" $OUT/plain$m.log | cut -c1-200
done
true
