#!/usr/bin/env bash
# Session 22: the long prompt beside three chats, paced with the shared forward only, HEAD's
# pacer (.gpu/old) against this one (the size's median for one-off steps, no retrying a power
# that broke the gap), alternated in one call; the 8B then the 1B. Copy with
# ../h100_session16/preamble.sh into .gpu/x/; .gpu/old is `git archive 5a43ccd engine | tar -x -C
# .gpu/old`. The device returns at most eight files a call: tar $OUT's files next time.
. "$(dirname "$0")/preamble.sh"
el installed
one() {  # one: <tag> <engine root> <model>
  PYTHONPATH=/tmp/site:$PWD/.gpu/x/site:$2 timeout 100 python3 - "$3" "$OUT/$1.json" > $OUT/$1.log 2>&1 <<'PY'
import runpy, sys
import engine.bench.long_prompt as lp
lp.DEFAULT_CONFIGS = [(3.0, True)]
sys.argv = ["bench", "--model", sys.argv[1], "--workload", "long-prompt", "--repeats", "4", "--json", sys.argv[2]]
runpy.run_module("engine.bench", run_name="__main__")
PY
  el "$1 rc=$?"; grep -iE "gap factor" $OUT/$1.log | cut -c1-170
}
for i in 1 2; do
  one old8b_$i $PWD/.gpu/old random:8b
  one new8b_$i $PWD random:8b
done
for i in 1 2; do
  one old1b_$i $PWD/.gpu/old random:1b
  one new1b_$i $PWD random:1b
done
true
