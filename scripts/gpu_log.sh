# Sourced by the GPU scripts after they cd to the repository: makes $OUT (default gpu-out), starts
# the log file $OUT/$1 as $LOG, defines say (a line to the log and to stderr), and sets the
# environment they share (the CUDA toolkit on PATH, its libraries, the JIT cache, unbuffered Python,
# NVLink multicast off for every NCCL process, the system's NCCL for the expert-parallel programs).
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
LOG=$OUT/$1
: > "$LOG"
say() { echo "== $*" | tee -a "$LOG" >&2; }
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export RAGDOT_CACHE_DIR=${RAGDOT_CACHE_DIR:-/tmp/ragdot-cache}
export PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0
if [ -z "${RAGDOT_NCCL_LIBRARY:-}" ] && [ -e /usr/lib/x86_64-linux-gnu/libnccl.so.2 ]; then
  export RAGDOT_NCCL_LIBRARY=/usr/lib/x86_64-linux-gnu/libnccl.so.2
fi
