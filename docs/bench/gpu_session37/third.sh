#!/usr/bin/env bash
# Session 37, a third call (after gpu_session35/first.sh and gpu_session36/second.sh): issue
# 13's "at p=0.7 never below plain with auto" on CUDA. The synthetic drafter at p=0.7 and 0.9,
# fixed k=4 beside "auto" drafting with it (--auto-too), the random 8B at 1, 4 and 16 chats,
# four prompts a slot, 128 tokens, alternated in one process. Copied flat into .gpu/x beside
# ../gpu_session35/preamble.sh.
. "$(dirname "$0")/preamble.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 520 python3 -m engine.bench --model random:8b --speculative synthetic \
  --acceptance 0.7 0.9 --draft-tokens 4 --auto-too --concurrency 1 4 16 --requests-per-slot 4 \
  --max-tokens 128 --repeats 3 --no-baseline --json $OUT/auto_synthetic_8b.json \
  > /tmp/auto_synthetic.log 2>&1
el "auto synthetic rc=$?"; grep "^c=" /tmp/auto_synthetic.log | cut -c1-230
true
