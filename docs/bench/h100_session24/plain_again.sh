#!/usr/bin/env bash
# Session 24, fourth call: plain decoding against BatchGenerator (as shipped: projections apart)
# and mlx_lm.generate, the 8B again (a second process after call 6) and the 1B, 1-32 chats.
# Copy with ../h100_session16/preamble.sh.
. "$(dirname "$0")/preamble.sh"
el installed
for m in 8b 1b; do
  timeout 200 python3 -m engine.bench --model random:$m --concurrency 1 4 8 16 32 --max-tokens 64 \
    --repeats 3 --json $OUT/plain${m}_2.json > $OUT/plain${m}_2.log 2>&1
  el "plain$m rc=$?"; grep "^c=" $OUT/plain${m}_2.log | cut -c1-200
done
true
