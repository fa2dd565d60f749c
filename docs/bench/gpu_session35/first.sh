#!/usr/bin/env bash
# Session 35, first call: where a step's host time goes on CUDA (host_split.py, 8B, 1 / 4 / 16
# rows): as shipped, with CUDA graphs off (MLX_USE_CUDA_GRAPHS=0: kernels launched one by one),
# and with one command buffer a forward (bare loops only); then session 34's value pass at the
# word widths it never ran (head sizes 96 and 256, float16 and float32: bit-equal to the old
# kernel?); on an H200 also one chat plain (seven alternated runs of the 8B). Copied flat into
# .gpu/x with preamble.sh and the .py files here and in gpu_session34/.
. "$(dirname "$0")/preamble.sh"
here="$(dirname "$0")"
export PYTHONPATH=$PYTHONPATH:$(cd "$here" && pwd)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
show() { cut -c1-700 "$1" | grep -E "^(bare|engine)" | sed -E "s/'ops': \{'total': ([0-9]+)[^}]*\}/ops=\1/"; }
timeout 200 python3 "$here/host_split.py" --model random:8b --batch 4 16 \
  --json $OUT/host_split.json > /tmp/host_split.log 2>&1
el "host_split rc=$?"; show /tmp/host_split.log; tail -2 /tmp/host_split.log | cut -c1-300
MLX_USE_CUDA_GRAPHS=0 timeout 200 python3 "$here/host_split.py" --model random:8b --batch 4 16 \
  --json $OUT/host_split_nographs.json > /tmp/host_split_nographs.log 2>&1
el "host_split no graphs rc=$?"; show /tmp/host_split_nographs.log
timeout 150 python3 "$here/va_rows.py" --other-sizes --json $OUT/va_other.json > /tmp/va_other.log 2>&1
el "va_rows rc=$? lines=$(grep -c '^B=' /tmp/va_other.log) diffs=$(grep -c DIFF /tmp/va_other.log)"
grep -E "D=(96|256)|float" /tmp/va_other.log | head -30 | cut -c1-160
tail -2 /tmp/va_other.log | cut -c1-200
left() { [ $(( $(date +%s) - t0 )) -lt "$1" ]; }  # true while fewer seconds than $1 passed
left 380 && { buffers 100000  # one command buffer a forward: encoding never waits for the device
timeout 100 python3 "$here/host_split.py" --model random:8b --batch 4 16 --bare-only \
  --json $OUT/host_split_one_buffer.json > /tmp/host_split_one_buffer.log 2>&1
el "host_split one buffer rc=$?"; show /tmp/host_split_one_buffer.log; }
buffers shipped
if [[ "$gpu" == *H200* ]] && left 420; then
  timeout 130 python3 -m engine.bench --model random:8b --concurrency 1 --max-tokens 128 \
    --repeats 7 --json $OUT/one8b_h200.json > /tmp/one8b_h200.log 2>&1
  el "8b rc=$?"; grep "^c=" /tmp/one8b_h200.log | cut -c1-230
fi
true
