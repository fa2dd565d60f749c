#!/usr/bin/env bash
# Session 34, third call: va_rows.py again (the second call's log did not come back), then the
# bare wide forward (gpu_session32/wide_probe.py) with this value pass and session 33's.
. "$(dirname "$0")/preamble.sh"
here="$(dirname "$0")"
export PYTHONPATH=$PYTHONPATH:$(cd "$here" && pwd)
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 100 python3 "$here/va_rows.py" --json $OUT/va_rows3.json > $OUT/va_rows3.log 2>&1
el "va_rows rc=$? diffs=$(grep -c DIFF $OUT/va_rows3.log)"
for way in rows serial; do
  pre=""; [ $way = serial ] && pre="$here/serial_values.py"
  timeout 75 python3 $pre "$here/wide_probe.py" --model random:8b --only-ours --repeats 3 \
    > $OUT/wide3_$way.log 2>&1
  el "wide $way rc=$?"; grep -E "^\|" $OUT/wide3_$way.log | grep -E " (1|4|16) x 5 "
done
true
