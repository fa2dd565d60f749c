#!/usr/bin/env bash
# Session 24, last call: the 1B's plain step at four rows (call 10: 5.9 ms, against 3.9 at eight
# and a 2.5 ms bare forward). Four processes alternated: as is, then without the ragged-decode
# attention kernel (TANDEM_NO_VERIFY_ATTENTION=1), twice. Copy with ../h100_session16/preamble.sh.
. "$(dirname "$0")/preamble.sh"
el installed
for i in 1 2; do
  for mode in kernel nokernel; do
    if [ $mode = nokernel ]; then export TANDEM_NO_VERIFY_ATTENTION=1; else unset TANDEM_NO_VERIFY_ATTENTION; fi
    timeout 100 python3 -m engine.bench --model random:1b --concurrency 4 8 --max-tokens 64 --repeats 3 \
      --json $OUT/rows1b_${mode}_$i.json > $OUT/rows1b_${mode}_$i.log 2>&1
    el "$mode $i rc=$?"; grep "^c=" $OUT/rows1b_${mode}_$i.log | cut -c1-150
    python3 -c "import json,sys;d=json.load(open(sys.argv[1]));[print(r['concurrency'],r['step_ms']) for r in d['results']]" $OUT/rows1b_${mode}_$i.json
  done
done
true
