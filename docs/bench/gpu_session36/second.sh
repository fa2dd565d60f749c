#!/usr/bin/env bash
# Session 36, a second call after gpu_session35/first.sh: attention by row groups
# (engine/cache/row_groups.py) on a GPU, where it is opt-in until measured. Three chats of 300
# tokens beside one of 8,192 (then 2,048), the random 8B and 1B, grouped against padded
# alternated in one process (engine.bench.mixed_lengths), plain and with prompt lookup (verify
# rounds: on CUDA these attend over the whole buffer and are never split). Copied flat into
# .gpu/x beside ../gpu_session35/preamble.sh (sourced from there: one copy).
. "$(dirname "$0")/preamble.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
left() { [ $(( $(date +%s) - t0 )) -lt "$1" ]; }  # true while fewer seconds than $1 passed
for spec in "random:8b 8192" "random:1b 8192" "random:8b 2048"; do
  set -- $spec
  left 420 || break
  name=$(echo "$1" | tr -d :)_$2
  timeout 150 python3 -m engine.bench.mixed_lengths --model "$1" --long-tokens "$2" \
    --max-tokens 64 --repeats 3 --json $OUT/mixed_$name.json > /tmp/mixed_$name.log 2>&1
  el "mixed $name rc=$?"; tail -1 /tmp/mixed_$name.log | cut -c1-400
done
left 480 && { timeout 100 python3 -m engine.bench.mixed_lengths --model random:8b \
  --long-tokens 8192 --speculative lookup --max-tokens 64 --repeats 2 \
  --json $OUT/mixed_8b_lookup.json > /tmp/mixed_lookup.log 2>&1
  el "mixed lookup rc=$?"; tail -1 /tmp/mixed_lookup.log | cut -c1-400; }
true
