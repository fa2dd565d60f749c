#!/usr/bin/env bash
# Session 34: the verify-attention kernel's value rows loaded VROWS at a time, against session
# 33's one at a time (serial_values.py): per call and bit-equality (va_rows.py), the bare wide
# forward (gpu_session32/wide_probe.py), then synthetic speculation in the engine (8B, k=4
# p=0.9, the lossless check on). Copied flat into .gpu/x with preamble.sh, the .py files here
# and wide_probe.py.
. "$(dirname "$0")/preamble.sh"
here="$(dirname "$0")"
cd "$here" && export PYTHONPATH=$PYTHONPATH:$PWD && cd - > /dev/null
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 150 python3 "$here/va_rows.py" --json $OUT/va_rows.json > $OUT/va_rows.log 2>&1
el "va_rows rc=$? lines=$(grep -c '^B=' $OUT/va_rows.log) diffs=$(grep -c DIFF $OUT/va_rows.log)"
grep -E "^B=(1|16) N=( 1| 5) L=( 256| 2048) D=128" $OUT/va_rows.log
for way in rows serial; do
  pre=""; [ $way = serial ] && pre="$here/serial_values.py"
  timeout 75 python3 $pre "$here/wide_probe.py" --model random:8b --only-ours --repeats 3 \
    --json $OUT/wide_$way.json > $OUT/wide_$way.log 2>&1
  el "wide $way rc=$?"; grep -E "^\|" $OUT/wide_$way.log | grep -E " (1|4|16) x (1|5) "
done
for way in rows serial; do
  if [ $way = serial ]; then run="$here/serial_values.py engine.bench"; else run="-m engine.bench"; fi
  timeout 120 python3 $run --model random:8b --speculative synthetic --acceptance 0.9 \
    --draft-tokens 4 --concurrency 4 16 --max-tokens 128 --repeats 1 --no-baseline \
    --json $OUT/syn_$way.json > $OUT/syn_$way.log 2>&1
  el "syn $way rc=$?"; grep -E "^c=" $OUT/syn_$way.log | cut -c1-200
done
true
