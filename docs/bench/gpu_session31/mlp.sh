#!/usr/bin/env bash
# Session 31: does a 16-row speculative batch after one chat pay a one-off with compiled MLPs
# (warm.sh: 271 ms a round in the ladder's first 16-row run, 21 without them)? The engine bench,
# synthetic k=4 p=0.9 at 1 then 16 chats in one process, as shipped and without compiled MLPs;
# each run's tok/s printed (ours and plain, in run order).
. "$(dirname "$0")/preamble.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
runs() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); [print(r['concurrency'], 'ours', r['ours_runs_tokens_per_s'], 'plain', r['plain_runs_tokens_per_s'], 'x', r['speedup_vs_plain'], 'ttft', r['ours_mean_ttft_s']) for r in d['results']]" $1; }
B="python3 -m engine.bench --model random:8b --speculative synthetic --acceptance 0.9 --draft-tokens 4 --concurrency 1 16 --max-tokens 128 --repeats 3 --no-baseline"
timeout 200 $B --json $OUT/m_shipped.json > $OUT/m_shipped.log 2>&1
el "shipped rc=$?"; runs $OUT/m_shipped.json
TANDEM_NO_COMPILED_MLP=1 timeout 200 $B --json $OUT/m_nomlp.json > $OUT/m_nomlp.log 2>&1
el "no compiled MLP rc=$?"; runs $OUT/m_nomlp.json
true
