#!/usr/bin/env bash
# Session 16, call 2: the 1B's ladder (plain steps, serial verify rounds, rounds ahead) with MLX's
# CUDA command buffers as shipped (commit every 100 ops / 1,000 MB on an H100 or H200), at 400 ops
# (an 8B forward in three or four buffers, so two forwards fit MLX's ten tasks in flight) and
# raised so that a forward is one buffer: does async_eval then return before the forward ran,
# and do rounds ahead overlap? Then MLX's matmul time at every row count 1-32 (cuBLASLt picks
# kernels by shape; on the H100 16 rows took longer than 32), as x @ w.T and as w @ x.T.
set -u
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
[ -d /tmp/site ] || { bash .gpu/b/install.sh > $OUT/install.log 2>&1 || { tail -5 $OUT/install.log; exit 1; }; }
export PYTHONPATH=/tmp/site:$PWD/.gpu/x/site:$PWD TANDEM_TOKENIZER_DIR=$PWD/.gpu/tok
el installed
for ops in shipped 400 100000; do
  if [ $ops = shipped ]; then unset MLX_MAX_OPS_PER_BUFFER MLX_MAX_MB_PER_BUFFER
  else export MLX_MAX_OPS_PER_BUFFER=$ops MLX_MAX_MB_PER_BUFFER=1000000; fi
  timeout 130 python3 -m engine.bench.profile_ladder --model random:1b --batch 1 4 16 --context 256 --tokens 32 \
    --repeats 2 --only bare-forward engine-core bare-verify engine-core-verify engine-core-ahead \
    --json $OUT/ladder_1b_ops$ops.json > $OUT/ladder_1b_ops$ops.log 2>&1
  el "ladder ops=$ops rc=$?"; grep "^| [a-z]" $OUT/ladder_1b_ops$ops.log | tail -15
done
unset MLX_MAX_OPS_PER_BUFFER MLX_MAX_MB_PER_BUFFER
timeout 60 python3 -m engine.bench.matmul_check --quick --rows $(seq 1 10) 12 16 20 24 32 --json $OUT/matmul_rows.json > $OUT/matmul_rows.log 2>&1
el "matmul rc=$?"; grep -c "^M=" $OUT/matmul_rows.log
true
