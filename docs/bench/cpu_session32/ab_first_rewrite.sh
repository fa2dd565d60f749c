#!/usr/bin/env bash
# Session 32: auto on the rewrite workload at one and four chats, before (OLD, 35c4aba) and after
# (NEW) the first-token acceptance, alternated processes.
# Usage: OLD=/path/old NEW=/path/new bash ab_first_rewrite.sh (run from NEW).
set -u
for i in ${RUNS:-1 2}; do
  for side in old new; do
    tree=$OLD; [ $side = new ] && tree=$NEW
    PYTHONPATH=$tree .venv/bin/python -m engine.bench --workload rewrite --speculative auto \
      --concurrency 1 4 --max-tokens 64 --repeats 2 --no-baseline \
      --json docs/bench/cpu_session32/rewrite_auto_${side}_$i.json > /tmp/ab_rw_${side}_$i.log 2>&1
    echo "$side $i rc=$?"; grep "^c=" /tmp/ab_rw_${side}_$i.log | cut -c1-200
  done
done
