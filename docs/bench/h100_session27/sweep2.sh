#!/usr/bin/env bash
# Session 27, fourth and fifth calls (one line each on the device, kept here): synthetic k=4 p=0.9
# for the 8B, the 8B plain at 8 and 32 chats, the 1B plain at 1, 4 and 16; then the 1B at one
# chat in four processes, compiled MLPs off (TANDEM_NO_COMPILED_MLP=1) and on, alternated.
. "$(dirname "$0")/preamble.sh"
timeout 190 python3 -m engine.bench --model random:8b --speculative synthetic --acceptance 0.9 \
  --draft-tokens 4 --concurrency 1 4 16 --max-tokens 128 --repeats 3 --json $OUT/syn8b.json > $OUT/syn8b.log 2>&1
timeout 140 python3 -m engine.bench --model random:8b --concurrency 8 32 --max-tokens 128 --repeats 3 \
  --json $OUT/plain8b_2.json > $OUT/plain8b_2.log 2>&1
timeout 90 python3 -m engine.bench --model random:1b --concurrency 1 4 16 --max-tokens 128 --repeats 3 \
  --json $OUT/plain1b_2.json > $OUT/plain1b_2.log 2>&1
for i in 1 2; do for v in 1 0; do
  TANDEM_NO_COMPILED_MLP=$v timeout 50 python3 -m engine.bench --model random:1b --concurrency 1 \
    --max-tokens 128 --repeats 3 --json $OUT/c1_no${v}_$i.json > $OUT/c1_no${v}_$i.log 2>&1
done; done
