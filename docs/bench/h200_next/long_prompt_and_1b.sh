#!/usr/bin/env bash
# The call after kernel_check_and_8b.sh, at once (the machine still warm, /tmp/site there): the
# long prompt on the 8B with the shared-forward check's fix (session 13, never measured there),
# synthetic speculation (verify rounds ahead and in series, alternated: engine/core/lookahead.py)
# and plain decoding on the 1B. SKINNY=1: with the kernel turned on.
set -u
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
[ -d /tmp/site ] || { bash .gpu/b/install.sh > $OUT/install.log 2>&1 || { tail -5 $OUT/install.log; exit 1; }; }
export PYTHONPATH=/tmp/site:$PWD TANDEM_TOKENIZER_DIR=$PWD/.gpu/tok
[ -n "${SKINNY:-}" ] && export TANDEM_SKINNY_MATMUL=1
timeout 170 python3 -m engine.bench --model random:8b --workload long-prompt --json $OUT/lp8b.json > $OUT/lp8b.log 2>&1
el "lp8b rc=$?"; grep "gap factor" $OUT/lp8b.log
timeout 260 python3 -m engine.bench --model random:1b --speculative synthetic --acceptance 0.9 --draft-tokens 4 \
  --concurrency 1 4 16 32 --max-tokens 48 --repeats 3 --no-baseline --serial-too --json $OUT/syn1b.json > $OUT/syn1b.log 2>&1
el "syn1b rc=$?"; grep "^c=" $OUT/syn1b.log
timeout 140 python3 -m engine.bench --model random:1b --concurrency 1 4 16 32 --max-tokens 64 --repeats 3 --json $OUT/plain1b.json > $OUT/plain1b.log 2>&1
el "plain1b rc=$?"; grep "^c=" $OUT/plain1b.log
