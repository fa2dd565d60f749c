#!/usr/bin/env bash
# Session 17: verify rounds ahead, in series, and as measured per batch size (engine/core/
# ahead_choice.py, the new default on a GPU), alternated in one process: the 8B (checked against
# mlx_lm.generate) and the 1B, synthetic k=4 p=0.9, 128-token replies (a trial of both ways takes
# about 56 rounds of each batch size). Copy with ../h100_session16/preamble.sh.
. "$(dirname "$0")/preamble.sh"
el installed
timeout 260 python3 -m engine.bench --model random:8b --speculative synthetic --draft-tokens 4 --acceptance 0.9 \
  --concurrency 1 4 16 --max-tokens 128 --repeats 3 --no-baseline --ahead-modes measured on off \
  --json $OUT/ahead8b.json > $OUT/ahead8b.log 2>&1
el "8b rc=$?"; grep "^c=" $OUT/ahead8b.log | cut -c1-150
timeout 150 python3 -m engine.bench --model random:1b --speculative synthetic --draft-tokens 4 --acceptance 0.9 \
  --concurrency 1 4 16 --max-tokens 128 --repeats 3 --no-baseline --no-check --ahead-modes measured on off \
  --json $OUT/ahead1b.json > $OUT/ahead1b.log 2>&1
el "1b rc=$?"; grep "^c=" $OUT/ahead1b.log | cut -c1-150
true
