# Sourced by the GPU scripts after they cd to the repository: makes $OUT (default gpu-out), starts
# the log file $OUT/$1 as $LOG, and defines say (a line to the log and to stderr).
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
LOG=$OUT/$1
: > "$LOG"
say() { echo "== $*" | tee -a "$LOG" >&2; }
