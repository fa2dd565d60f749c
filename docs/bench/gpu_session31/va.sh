#!/usr/bin/env bash
# Session 31: a verify round of 16 rows x 256 keys took 85 ms through our cache and 17 ms through
# mlx-lm's (H100 ladder, session 30's one.sh). Is it the attention calls the kernel leaves to MLX
# (over its limit on keys read)? The ladder's two verify rungs as shipped and with the limit
# lifted, at 16 x 256 and 4 x 1024 (both over it), and 16 x 64 (under it); then the engine's
# synthetic speculation at 16 chats with 512-token replies, as shipped and with the limit lifted.
. "$(dirname "$0")/preamble.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
L="python3 .gpu/x/va_limit.py engine.bench.profile_ladder --model random:8b --tokens 16 --repeats 2 --only bare-verify ours-verify"
for shape in "16 256" "4 1024"; do set -- $shape
  for lim in shipped 1e12; do
    VA_LIMIT=$lim timeout 120 $L --batch $1 --context $2 --json $OUT/va_$1_$2_$lim.json > $OUT/va_$1_$2_$lim.log 2>&1
    el "b=$1 ctx=$2 limit=$lim rc=$?"; grep -E "^\| (bare|ours)-verify|^calls" $OUT/va_$1_$2_$lim.log | sort -u | head -8
  done
done
VA_LIMIT=shipped timeout 100 $L --batch 16 --context 64 --json $OUT/va_16_64.json > $OUT/va_16_64.log 2>&1
el "b=16 ctx=64 rc=$?"; grep -E "^\| (bare|ours)-verify|^calls" $OUT/va_16_64.log | sort -u | head -6
# the engine: synthetic k=4 p=0.9 at 16 chats, 512 tokens (the keys pass the limit at ~300)
for lim in shipped 1e12; do
  VA_LIMIT=$lim timeout 150 python3 .gpu/x/va_limit.py engine.bench --model random:8b --speculative \
    synthetic --acceptance 0.9 --draft-tokens 4 --concurrency 16 --max-tokens 512 --repeats 2 \
    --no-baseline --no-check --json $OUT/syn16_$lim.json > $OUT/syn16_$lim.log 2>&1
  el "syn16 limit=$lim rc=$?"; grep -E "^c=|^calls" $OUT/syn16_$lim.log | cut -c1-200 | head -6
done
true
