#!/usr/bin/env bash
# Session 28, second call: a few queries' attention by way (attn_probe.py); profile_round for
# the 8B at one row, widths 1 and 5, with "causal" calls in MLX (TANDEM_NO_VERIFY_ATTENTION=1
# keeps every call there) and in Tandem's kernel; then the engine with causal calls in the
# kernel against MLX (causal_ab.py), one chat, the 8B and the 1B.
. "$(dirname "$0")/preamble.sh"
el installed
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 100 python3 .gpu/x/attn_probe.py $OUT/attn.json > $OUT/attn.log 2>&1
el "attn rc=$?"; tail -2 $OUT/attn.log | cut -c1-900
for way in mlx ours; do
  if [ $way = mlx ]; then export TANDEM_NO_VERIFY_ATTENTION=1; else unset TANDEM_NO_VERIFY_ATTENTION; fi
  timeout 100 python3 -m engine.bench.profile_round --model random:8b --batch 1 --context 512 --widths 1 5 > $OUT/round_$way.log 2>&1
  el "round $way rc=$?"; tail -2 $OUT/round_$way.log
done
unset TANDEM_NO_VERIFY_ATTENTION
REPEATS=5 timeout 170 python3 .gpu/x/causal_ab.py random:8b $OUT/ab8b.json 128 1 > $OUT/ab8b.log 2>&1
el "ab8b rc=$?"; grep -E "^\{|MISMATCH|Error" $OUT/ab8b.log | cut -c1-700
REPEATS=5 timeout 120 python3 .gpu/x/causal_ab.py random:1b $OUT/ab1b.json 128 1 > $OUT/ab1b.log 2>&1
el "ab1b rc=$?"; grep -E "^\{|MISMATCH|Error" $OUT/ab1b.log | cut -c1-700
true
