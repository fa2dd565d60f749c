#!/usr/bin/env bash
# Session 16: the 1B's ladder (plain steps, serial verify rounds, rounds ahead) with MLX's CUDA
# command buffers as shipped (commit every 100 ops / 1,000 MB on an H100 or H200), raised so that
# a forward is one buffer, and at 400 ops (an 8B forward in a few buffers, so two forwards fit
# MLX's ten tasks in flight): does async_eval then return before the forward ran, and do rounds
# ahead overlap? Also MLX's matmul time at row counts 1-32 (cuBLASLt picks kernels by shape; on
# the H100 16 rows took longer than 32), as x @ w.T and as w @ x.T.
. "$(dirname "$0")/preamble.sh"
el installed
ladder() {
  buffers $1
  timeout 125 python3 -m engine.bench.profile_ladder --model random:1b --batch 1 4 16 --context 256 --tokens 32 \
    --repeats 2 --only bare-forward engine-core bare-verify engine-core-verify engine-core-ahead \
    --json $OUT/ladder_1b_ops$1.json > $OUT/ladder_1b_ops$1.log 2>&1
  el "ladder ops=$1 rc=$?"; grep "^| [a-z]" $OUT/ladder_1b_ops$1.log | tail -15
  buffers shipped
}
ladder shipped
ladder 100000
timeout 60 python3 -m engine.bench.matmul_check --quick --rows $(seq 1 10) 12 16 20 24 32 --json $OUT/matmul_rows.json > $OUT/matmul_rows.log 2>&1
el "matmul rc=$?"; grep -c "^M=" $OUT/matmul_rows.log
[ $(( $(date +%s) - t0 )) -lt 330 ] && ladder 400
true
