#!/usr/bin/env bash
# Session 32: the verify-attention kernel's query blocks: layouts per shape (va_layouts.py), the
# bare wide forward with and without them (wide_probe.py).
# It ran against the query-blocks variant of the kernel, since reverted (TANDEM_NO_QUERY_BLOCKS is
# gone; wide_qb_off is the kernel as shipped then): docs/benchmarks.md, twenty-seventh pass.
. "$(dirname "$0")/preamble.sh"
here="$(dirname "$0")"
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 python3 "$here/va_layouts.py" --json $OUT/va_layouts.json > $OUT/va_layouts.log 2>&1
el "layouts rc=$?"; grep -v "^  " $OUT/va_layouts.log | cut -c1-230 | head -100
for qb in on off; do
  if [ $qb = off ]; then export TANDEM_NO_QUERY_BLOCKS=1; else unset TANDEM_NO_QUERY_BLOCKS; fi
  timeout 120 python3 "$here/wide_probe.py" --model random:8b --only-ours --repeats 3 \
    --json $OUT/wide_qb_$qb.json > $OUT/wide_qb_$qb.log 2>&1
  el "wide qb=$qb rc=$?"; grep "^|" $OUT/wide_qb_$qb.log
done
unset TANDEM_NO_QUERY_BLOCKS
true
