#!/usr/bin/env bash
# Session 18, second call: verify forwards widened to 6 tokens (engine/core/verify_width.py)
# against unwidened, alternated in one process (random 8B, checked against mlx_lm.generate, and
# the 1B; synthetic k=4 p=0.9 and k=2 p=0.7: widths 5 and 3 at one row, 3 at two), then the
# measured choice of rounds ahead against both fixed ways on the 8B (its median version was never
# run on a GPU). Copy with ../h100_session16/preamble.sh.
. "$(dirname "$0")/preamble.sh"
el installed
timeout 170 python3 -m engine.bench --model random:8b --speculative synthetic --draft-tokens 4 2 \
  --acceptance 0.9 0.7 --concurrency 1 2 --max-tokens 96 --repeats 3 --no-baseline \
  --verify-min-tokens 1 6 --json $OUT/widen8b.json > $OUT/widen8b.log 2>&1
el "widen 8b rc=$?"; grep "^c=" $OUT/widen8b.log | cut -c1-160
timeout 100 python3 -m engine.bench --model random:1b --speculative synthetic --draft-tokens 4 \
  --acceptance 0.9 --concurrency 1 2 --max-tokens 96 --repeats 3 --no-baseline --no-check \
  --verify-min-tokens 1 6 --json $OUT/widen1b.json > $OUT/widen1b.log 2>&1
el "widen 1b rc=$?"; grep "^c=" $OUT/widen1b.log | cut -c1-160
timeout 230 python3 -m engine.bench --model random:8b --speculative synthetic --draft-tokens 4 --acceptance 0.9 \
  --concurrency 1 4 16 --max-tokens 128 --repeats 3 --no-baseline --no-check --ahead-modes measured on off \
  --json $OUT/ahead8b.json > $OUT/ahead8b.log 2>&1
el "ahead 8b rc=$?"; grep "^c=" $OUT/ahead8b.log | cut -c1-160
true
