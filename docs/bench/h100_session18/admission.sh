#!/usr/bin/env bash
# Session 18, fifth call: where 16 chats' first tokens go on the 8B (our steps against
# BatchGenerator's time to every first token), then plain decoding at 16 chats again, five
# alternated runs (the third call's three read 692, 1,194 and 803 tok/s against BatchGenerator's
# steady 967-993). Copy with ../h100_session16/preamble.sh.
. "$(dirname "$0")/preamble.sh"
el installed
timeout 150 python3 -m engine.bench.admission_trace --model random:8b --concurrency 16 --repeats 3 \
  --json $OUT/admission8b.json > $OUT/admission8b.log 2>&1
el "admission rc=$?"; tail -40 $OUT/admission8b.log | cut -c1-160
timeout 200 python3 -m engine.bench --model random:8b --concurrency 16 --max-tokens 64 --repeats 5 --no-check \
  --json $OUT/plain8b_c16.json > $OUT/plain8b_c16.log 2>&1
el "plain8b rc=$?"; grep "^c=" $OUT/plain8b_c16.log | cut -c1-200
true
