#!/usr/bin/env bash
# The next H200 run (planned in session 14, when no device could be lent): the skinny-matmul
# kernel (engine/kernels/skinny_matmul_cuda.py) checked and timed against MLX, then the 8B with it
# when every case is right. Stage as ../shared/gpu/README.md says, copy this to .gpu/x/, and make
# the second call with carry [".gpu/b", ".gpu/x", ".gpu/tok"] and command `bash .gpu/x/<this>`.
# .gpu/tok: the default model's tokenizer.json, tokenizer_config.json, special_tokens_map.json and
# config.json (from the converted model under the user cache folder).
set -u
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
bash .gpu/b/install.sh > $OUT/install.log 2>&1 || { tail -5 $OUT/install.log; exit 1; }
export PYTHONPATH=/tmp/site:$PWD TANDEM_TOKENIZER_DIR=$PWD/.gpu/tok
el installed
timeout 150 python3 -m engine.bench.matmul_check --json $OUT/matmul_check.json > $OUT/matmul_check.log 2>&1
el "matmul_check rc=$?"
grep -c "kernel " $OUT/matmul_check.log; grep -m3 -i "error\b.*Trace\|Traceback\|rror:" $OUT/matmul_check.log
python3 - <<'PY' && export TANDEM_SKINNY_MATMUL=1
import json, os, sys
rows = json.load(open(os.environ["OUT"] + "/matmul_check.json"))
bad = [r for r in rows if r["error"] or (r["max_abs_error"] is not None and r["max_abs_error"] > 4 * max(r["mlx_error"], 1e-2))]
ok = [r for r in rows if r["kernel_ms"] is not None]
print(len(ok), "timed,", len(bad), "bad")
for r in bad[:5]: print(r)
best = {}
for r in ok:
    key = (r["rows"], r["k"], r["n"])
    if key not in best or r["kernel_ms"] < best[key]["kernel_ms"]: best[key] = r
for key, r in sorted(best.items()):
    dflt = [x for x in ok if (x["rows"], x["k"], x["n"]) == key and (x["cols"], x["warps"]) == (2, 4)]
    print(key, "mlx %.4f" % r["mlx_ms"], "best %.4f (%d,%d) %s GB/s" % (r["kernel_ms"], r["cols"], r["warps"], r["kernel_gb_s"]), "default %.4f" % dflt[0]["kernel_ms"] if dflt else "")
sys.exit(1 if bad or not ok else 0)
PY
el "kernel on? TANDEM_SKINNY_MATMUL=${TANDEM_SKINNY_MATMUL:-0}"
timeout 130 python3 -m engine.bench --model random:8b --concurrency 1 4 16 --max-tokens 64 --repeats 3 --json $OUT/plain8b.json > $OUT/plain8b.log 2>&1
el "plain8b rc=$?"; grep "^c=" $OUT/plain8b.log
timeout 150 python3 -m engine.bench --model random:8b --speculative synthetic --acceptance 0.9 --draft-tokens 4 \
  --concurrency 1 4 16 --max-tokens 48 --repeats 2 --no-baseline --serial-too --json $OUT/syn8b.json > $OUT/syn8b.log 2>&1
el "syn8b rc=$?"; grep "^c=" $OUT/syn8b.log
# the same 8B plain points with the kernel off: its before / after (the baselines are as shipped
# in both runs, so the two ratios compare across the processes)
TANDEM_SKINNY_MATMUL=0 timeout 110 python3 -m engine.bench --model random:8b --concurrency 1 4 16 --max-tokens 64 --repeats 3 --json $OUT/plain8b_kernel_off.json > $OUT/plain8b_kernel_off.log 2>&1
el "plain8b kernel off rc=$?"; grep "^c=" $OUT/plain8b_kernel_off.log
