#!/usr/bin/env bash
# Session 24, last call: four_rows.sh's question on the 8B, one pair of processes.
. "$(dirname "$0")/preamble.sh"
el installed
for mode in kernel nokernel; do
  if [ $mode = nokernel ]; then export TANDEM_NO_VERIFY_ATTENTION=1; else unset TANDEM_NO_VERIFY_ATTENTION; fi
  timeout 110 python3 -m engine.bench --model random:8b --concurrency 4 8 --max-tokens 48 --repeats 2 --no-check \
    --json $OUT/rows8b_${mode}.json > $OUT/rows8b_${mode}.log 2>&1
  el "$mode rc=$?"; grep "^c=" $OUT/rows8b_${mode}.log | cut -c1-150
  python3 -c "import json,sys;d=json.load(open(sys.argv[1]));[print(r['concurrency'],r['step_ms']) for r in d['results']]" $OUT/rows8b_${mode}.json
done
true
