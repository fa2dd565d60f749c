#!/usr/bin/env bash
# Session 33: a Gemma-3-shaped random model (18 layers, 15 of them sliding windows of 512, head
# size 256, one key head; made by tests/tiny_models.make_tiny_gemma3_dir into $MODEL) speculating
# on the 2-core CPU, the engine before position_moves.py (OLD, a worktree at 17bc121) against
# after (NEW), alternated processes. Its sliding-window layers roll back per row every round.
# Usage: OLD=/path/old NEW=/path/new MODEL=/tmp/g3w bash gemma_ab.sh (run from NEW).
set -u
[ -d "$MODEL" ] || PYTHONPATH=$NEW:$NEW/tests .venv/bin/python -c "
import engine
from pathlib import Path
from tiny_models import make_tiny_gemma3_dir
make_tiny_gemma3_dir(Path('$MODEL'), sliding_window=512, sliding_window_pattern=6,
    vocab_size=49152, hidden_size=640, num_layers=18, head_dim=256,
    query_pre_attn_scalar=256, intermediate_size=2048)"
for i in ${RUNS:-1 2}; do
  for side in old new; do
    tree=$OLD; [ $side = new ] && tree=$NEW
    PYTHONPATH=$tree .venv/bin/python -m engine.bench --model "$MODEL" --speculative synthetic \
      --acceptance 0.7 --draft-tokens 4 --concurrency 1 4 --max-tokens 64 --repeats 2 \
      --no-baseline --json docs/bench/cpu_session33/gemma_${side}_$i.json \
      > /tmp/gemma_${side}_$i.log 2>&1
    echo "$side $i rc=$?"; grep "^c=" /tmp/gemma_${side}_$i.log | cut -c1-200
  done
done
