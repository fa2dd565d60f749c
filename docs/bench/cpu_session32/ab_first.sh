#!/usr/bin/env bash
# Session 32: auto on chat at four chats, the engine before the first-token acceptance (OLD, a
# worktree at 35c4aba) against after (NEW), alternated processes.
# Usage: OLD=/path/old NEW=/path/new bash ab_first.sh (run from NEW).
set -u
for i in ${RUNS:-1 2}; do
  for side in old new; do
    tree=$OLD; [ $side = new ] && tree=$NEW
    PYTHONPATH=$tree .venv/bin/python -m engine.bench --speculative auto --concurrency 4 \
      --max-tokens 64 --repeats 2 --no-baseline \
      --json docs/bench/cpu_session32/chat_auto_c4_${side}_$i.json > /tmp/ab_first_${side}_$i.log 2>&1
    echo "$side $i rc=$?"; grep "^c=" /tmp/ab_first_${side}_$i.log | cut -c1-200
  done
done
