#!/usr/bin/env bash
# Session 32: auto on chat at one and four chats with MIN_GAIN as shipped (1.03) and at 1.10,
# alternated processes (min_gain.py). Run from the repository root.
set -u
for i in ${RUNS:-1 2 3}; do
  for gain in 1.03 1.10; do
    PYTHONPATH=$PWD .venv/bin/python docs/bench/cpu_session32/min_gain.py $gain --speculative auto \
      --concurrency 1 4 --max-tokens 64 --repeats 2 --no-baseline \
      --json docs/bench/cpu_session32/chat_auto_gain${gain}_$i.json > /tmp/ab_gain_${gain}_$i.log 2>&1
    echo "gain $gain $i rc=$?"; grep "^c=" /tmp/ab_gain_${gain}_$i.log | cut -c1-200
  done
done
