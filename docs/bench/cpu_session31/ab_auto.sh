#!/usr/bin/env bash
# Session 31: auto on chat at 1 and 4 chats, the old engine (a worktree at e465562, OLD) against
# the new (NEW), alternated processes. Usage: OLD=/path/old NEW=/path/new bash ab_auto.sh
# (run from NEW; each tree's engine is put first on PYTHONPATH).
set -u
for i in 1 2 3; do
  for side in old new; do
    tree=$OLD; [ $side = new ] && tree=$NEW
    PYTHONPATH=$tree python -m engine.bench --speculative auto --concurrency 1 4 --max-tokens 64 \
      --repeats 3 --no-baseline --json docs/bench/cpu_session31/chat_auto_c1_c4_${side}_$i.json \
      > /tmp/ab_auto_${side}_$i.log 2>&1
    echo "$side $i rc=$?"; grep "^c=" /tmp/ab_auto_${side}_$i.log | cut -c1-200
  done
done
