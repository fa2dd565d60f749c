#!/usr/bin/env bash
# Session 34, second call: the value pass with vector loads and unused rows zeroed, against
# session 33's (serial_values.py): per call and bit-equality (va_rows.py), then synthetic
# speculation in the engine (8B, k=4 p=0.9, 1 / 4 / 16 chats, the lossless check on), two
# alternated pairs of processes. Copied flat into .gpu/x with preamble.sh and the .py files here.
. "$(dirname "$0")/preamble.sh"
here="$(dirname "$0")"
export PYTHONPATH=$PYTHONPATH:$(cd "$here" && pwd)
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 100 python3 "$here/va_rows.py" --json $OUT/va_rows2.json > $OUT/va_rows2.log 2>&1
el "va_rows rc=$? lines=$(grep -c '^B=' $OUT/va_rows2.log) diffs=$(grep -c DIFF $OUT/va_rows2.log)"
grep -E "^B=(1|16) N=( 1| 5) L=( 256| 2048) D=128|^  rows" $OUT/va_rows2.log | head -20
for i in 1 2; do for way in rows serial; do
  if [ $way = serial ]; then run="$here/serial_values.py engine.bench"; else run="-m engine.bench"; fi
  timeout 120 python3 $run --model random:8b --speculative synthetic --acceptance 0.9 \
    --draft-tokens 4 --concurrency 1 4 16 --max-tokens 128 --repeats 1 --no-baseline \
    --json $OUT/syn2_${way}_$i.json > $OUT/syn2_${way}_$i.log 2>&1
  el "syn $way $i rc=$?"; grep -E "^c=" $OUT/syn2_${way}_$i.log | cut -c1-200
done; done
true
