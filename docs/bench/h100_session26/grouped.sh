#!/usr/bin/env bash
# Session 26: the verify-attention kernel by groups of query heads. Per call against the old
# kernel and MLX (grouped_check.py), then in the engine alternated with the old kernel
# (grouped_ab.py: the 8B, plain and synthetic k=4 p=0.9). Copy with
# ../h100_session16/preamble.sh and the old kernel (git show 0e2654d:engine/kernels/
# verify_attention_cuda.py > old_vac.py) into .gpu/x/.
. "$(dirname "$0")/preamble.sh"
el installed
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 python3 .gpu/x/grouped_check.py .gpu/x/old_vac.py $OUT/gcheck.json > $OUT/gcheck.log 2>&1
el "check rc=$?"; tail -3 $OUT/gcheck.log | cut -c1-300
timeout 220 python3 .gpu/x/grouped_ab.py random:8b .gpu/x/old_vac.py $OUT/gab8b.json 128 1 4 16 > $OUT/gab8b.log 2>&1
el "8b rc=$?"; grep -E "^\{|MISMATCH" $OUT/gab8b.log | cut -c1-500
true
