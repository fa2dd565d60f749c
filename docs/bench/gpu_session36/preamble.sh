# Sourced by this folder's device scripts: install MLX (once per machine), set the paths, and
# define `el` (elapsed seconds, then a message) and `buffers` (MLX's CUDA command-buffer limits:
# `shipped`, or that many ops per buffer with no size limit).
set -u
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
[ -d /tmp/site ] || { bash .gpu/b/install.sh > $OUT/install.log 2>&1 || { tail -5 $OUT/install.log; exit 1; }; }
export PYTHONPATH=/tmp/site:$PWD/.gpu/x/site:$PWD TANDEM_TOKENIZER_DIR=$PWD/.gpu/tok
buffers() {
  if [ "$1" = shipped ]; then unset MLX_MAX_OPS_PER_BUFFER MLX_MAX_MB_PER_BUFFER
  else export MLX_MAX_OPS_PER_BUFFER=$1 MLX_MAX_MB_PER_BUFFER=1000000; fi
}
