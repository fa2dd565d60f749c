#!/usr/bin/env bash
# Session 31: the ladder's engine-core-verify at 16 rows read 182 ms a round in its first run and
# 23 ms in its second (after the batch-1 rungs, same process). Which one-off costs? As shipped,
# without the compiled MLPs, and at 16 rows alone; each run's ms per round printed.
. "$(dirname "$0")/preamble.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
runs() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); [print(r['rung'], r['batch'], r['runs_ms'], r['detail']['step_timing_ms']) for r in d['results']]" $1; }
P="python3 -m engine.bench.profile_ladder --model random:8b --context 256 --tokens 32 --only engine-core-verify"
timeout 120 $P --batch 1 16 --repeats 3 --json $OUT/w_shipped.json > $OUT/w_shipped.log 2>&1
el "shipped rc=$?"; runs $OUT/w_shipped.json
TANDEM_NO_COMPILED_MLP=1 timeout 120 $P --batch 1 16 --repeats 3 --json $OUT/w_nomlp.json > $OUT/w_nomlp.log 2>&1
el "no compiled MLP rc=$?"; runs $OUT/w_nomlp.json
timeout 120 $P --batch 16 --repeats 3 --json $OUT/w_16.json > $OUT/w_16.log 2>&1
el "16 alone rc=$?"; runs $OUT/w_16.json
true
