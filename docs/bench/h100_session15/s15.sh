#!/usr/bin/env bash
# Session 15: verify rounds ahead against serial (1B and 8B), then the skinny-matmul check.
set -u
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
[ -d /tmp/site ] || { bash .gpu/b/install.sh > $OUT/install.log 2>&1 || { tail -5 $OUT/install.log; exit 1; }; }
export PYTHONPATH=/tmp/site:$PWD/.gpu/x/site:$PWD TANDEM_TOKENIZER_DIR=$PWD/.gpu/tok
el installed
timeout 200 python3 -m engine.bench --model random:1b --speculative synthetic --acceptance 0.9 --draft-tokens 4 \
  --concurrency 1 4 16 32 --max-tokens 48 --repeats 2 --no-baseline --serial-too --json $OUT/syn1b.json > $OUT/syn1b.log 2>&1
el "syn1b rc=$?"; grep "^c=" $OUT/syn1b.log
timeout 170 python3 -m engine.bench --model random:8b --speculative synthetic --acceptance 0.9 --draft-tokens 4 \
  --concurrency 1 4 16 --max-tokens 48 --repeats 2 --no-baseline --serial-too --json $OUT/syn8b.json > $OUT/syn8b.log 2>&1
el "syn8b rc=$?"; grep "^c=" $OUT/syn8b.log
true
true
