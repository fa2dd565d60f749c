#!/usr/bin/env bash
# Session 34, last call with what budget was left: on an H200, one chat plain (seven alternated
# runs, 8B then 1B: the one-chat target on the H200 itself); on an H100, one more A/B of the value
# pass in the engine (synthetic k=4 p=0.9, 4 and 16 chats, this kernel against session 33's).
. "$(dirname "$0")/preamble.sh"
here="$(dirname "$0")"
export PYTHONPATH=$PYTHONPATH:$(cd "$here" && pwd)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
if [[ "$gpu" == *H200* ]]; then
  timeout 130 python3 -m engine.bench --model random:8b --concurrency 1 --max-tokens 128 \
    --repeats 7 --json $OUT/one8b_h200.json > $OUT/one8b_h200.log 2>&1
  el "8b rc=$?"; grep "^c=" $OUT/one8b_h200.log | cut -c1-230
  timeout 80 python3 -m engine.bench --model random:1b --concurrency 1 --max-tokens 128 \
    --repeats 7 --json $OUT/one1b_h200.json > $OUT/one1b_h200.log 2>&1
  el "1b rc=$?"; grep "^c=" $OUT/one1b_h200.log | cut -c1-230
else
  for way in rows serial; do
    if [ $way = serial ]; then run="$here/serial_values.py engine.bench"; else run="-m engine.bench"; fi
    timeout 100 python3 $run --model random:8b --speculative synthetic --acceptance 0.9 \
      --draft-tokens 4 --concurrency 4 16 --max-tokens 128 --repeats 1 --no-baseline \
      --json $OUT/syn3_$way.json > $OUT/syn3_$way.log 2>&1
    el "syn $way rc=$?"; grep -E "^c=" $OUT/syn3_$way.log | cut -c1-200
  done
fi
true
