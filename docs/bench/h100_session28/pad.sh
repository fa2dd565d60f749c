#!/usr/bin/env bash
# Session 28, first call: MLP calls of a few token rows padded to a width the GPU measured
# cheaper. The 8B's MLP passes by width and its forwards padded against unpadded (pad_probe.py),
# then the engine with the measured padding against without (pad_ab.py, 1 and 4 chats). Copy
# this folder's files with ../h100_session16/preamble.sh into .gpu/x/.
. "$(dirname "$0")/preamble.sh"
el installed
nvidia-smi --query-gpu=name --format=csv,noheader
MODEL=${MODEL:-random:8b}
tag=${MODEL#random:}
ROUNDS=3 REPS=5 timeout 200 python3 .gpu/x/pad_probe.py $MODEL $OUT/probe$tag.json > $OUT/probe$tag.log 2>&1
el "probe rc=$?"; grep -E "^pad_to|Error|^mlp round 2|^fwd round 2" $OUT/probe$tag.log | cut -c1-900
timeout ${AB_S:-300} python3 .gpu/x/pad_ab.py $MODEL $OUT/ab$tag.json 128 ${CHATS:-1 4} > $OUT/ab$tag.log 2>&1
el "ab rc=$?"; grep -E "^pad_to|^\{|MISMATCH|Error" $OUT/ab$tag.log | cut -c1-700
true
