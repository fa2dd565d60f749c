#!/usr/bin/env bash
# Session 16, call 3 (same machine): the 8B's plain steps against BatchGenerator and the 1B's
# synthetic rounds (ahead and serial) with command buffers as shipped, at 400 ops and one per forward.
set -u
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
[ -d /tmp/site ] || { bash .gpu/b/install.sh > $OUT/install.log 2>&1 || { tail -5 $OUT/install.log; exit 1; }; }
export PYTHONPATH=/tmp/site:$PWD/.gpu/x/site:$PWD TANDEM_TOKENIZER_DIR=$PWD/.gpu/tok
for ops in shipped 400 100000; do
  if [ $ops = shipped ]; then unset MLX_MAX_OPS_PER_BUFFER MLX_MAX_MB_PER_BUFFER
  else export MLX_MAX_OPS_PER_BUFFER=$ops MLX_MAX_MB_PER_BUFFER=1000000; fi
  timeout 110 python3 -m engine.bench --model random:8b --concurrency 4 16 --max-tokens 64 --repeats 2 --no-check \
    --json $OUT/plain8b_ops$ops.json > $OUT/plain8b_ops$ops.log 2>&1
  el "plain8b ops=$ops rc=$?"; grep "^c=" $OUT/plain8b_ops$ops.log
  timeout 75 python3 -m engine.bench --model random:1b --speculative synthetic --acceptance 0.9 --draft-tokens 4 \
    --concurrency 1 4 16 --max-tokens 48 --repeats 2 --no-baseline --no-check --serial-too --json $OUT/syn1b_ops$ops.json > $OUT/syn1b_ops$ops.log 2>&1
  el "syn1b ops=$ops rc=$?"; grep "^c=" $OUT/syn1b_ops$ops.log
done
true
