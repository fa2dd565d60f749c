#!/usr/bin/env bash
set -u
[ -d /tmp/site ] || { bash .gpu/b/install.sh > $OUT/install.log 2>&1 || { tail -5 $OUT/install.log; exit 1; }; }
export PYTHONPATH=/tmp/site:$PWD/.gpu/x/site:$PWD TANDEM_TOKENIZER_DIR=$PWD/.gpu/tok
for on in 1 0; do
  TANDEM_SKINNY_MATMUL=$on timeout 220 python3 -m engine.bench --model random:8b --concurrency 4 --max-tokens 64 --repeats 3 \
    --json $OUT/plain8b_c4_skinny$on.json > $OUT/plain8b_c4_skinny$on.log 2>&1
  echo "skinny=$on rc=$?"; grep -i "^c=\|skinny" $OUT/plain8b_c4_skinny$on.log | head -5
done
