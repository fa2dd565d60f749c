#!/usr/bin/env bash
set -u
[ -d /tmp/site ] || { bash .gpu/b/install.sh > $OUT/install.log 2>&1 || { tail -5 $OUT/install.log; exit 1; }; }
export PYTHONPATH=/tmp/site:$PWD/.gpu/x/site:$PWD TANDEM_TOKENIZER_DIR=$PWD/.gpu/tok
timeout 240 python3 -m engine.bench.profile_ladder --model random:1b --batch 1 4 16 --context 256 --tokens 48 --repeats 2 \
  --only bare-forward engine-core engine-core-verify engine-core-ahead --json $OUT/ladder_1b.json > $OUT/ladder_1b.log 2>&1
echo "ladder rc=$?"; tail -16 $OUT/ladder_1b.log
