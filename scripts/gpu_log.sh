# Sourced by the GPU scripts after they cd to the repository: makes $OUT (default gpu-out), starts
# the log file $OUT/$1 as $LOG, defines say (a line to the log and to stderr), and sets the
# environment they share (the CUDA toolkit on PATH, its libraries, the JIT cache, unbuffered Python).
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
LOG=$OUT/$1
: > "$LOG"
say() { echo "== $*" | tee -a "$LOG" >&2; }
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export RAGDOT_CACHE_DIR=${RAGDOT_CACHE_DIR:-/tmp/ragdot-cache}
export PYTHONUNBUFFERED=1
