#!/usr/bin/env bash
# Session 33: do host-made arrays in a pipelined loop cost the GPU loop time (host_arrays.py)?
# Copied flat into .gpu/x with preamble.sh, host_arrays.py and gpu_session32/wide_probe.py.
. "$(dirname "$0")/preamble.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 300 python3 "$(dirname "$0")/host_arrays.py" --model random:8b --json $OUT/ha_8b.json \
  > $OUT/ha_8b.log 2>&1
el "probe rc=$?"; cut -c1-200 $OUT/ha_8b.log | tail -20
# the engine's verify round at 16 rows against a bare width-5 forward, on the same machine
timeout 150 python3 -m engine.bench.profile_ladder --model random:8b --batch 16 --context 256 \
  --tokens 32 --repeats 2 \
  --only bare-forward bare-verify ours-verify engine-core engine-core-verify engine-core-ahead \
  --json $OUT/ladder_8b.json > $OUT/ladder_8b.log 2>&1
el "ladder rc=$?"; tail -9 $OUT/ladder_8b.log | cut -c1-200
true
