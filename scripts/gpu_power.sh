#!/usr/bin/env bash
# Power, clocks and energy per run under a sustained load: for each RAGDOT_CUDA_VARIANT override
# (and the planner's own kernel), gpu_bench --hold runs ragdot's kernel and the dense roof back to
# back for a few seconds each while nvidia-smi samples the board; bench/gpu_power.py matches the
# samples to those windows. A Hopper board under such a load sits at its power cap, so these
# joules per run, not a single launch's speed, decide what a sustained run gets.
#
#   OUT=/some/dir scripts/gpu_power.sh [--only CASE] [--skew S] [--specs "SPEC;SPEC"] [--hold SECONDS]
#
# --only: one gpu_bench case (default "mixtral prefill up"); --skew: its router skew (default 0);
# --specs: ';'-separated overrides, each held once, an empty one for the planner's kernel ("" or
# ";": it alone; default ";cluster=2;bm=192");
# --hold: seconds per kernel (default 4). Writes $OUT/power_table.md, $OUT/power.json, the samples
# ($OUT/smi.csv) and gpu_bench's JSON per override ($OUT/power_N.json). Uses .devbin/gpu_bench
# (scripts/gpu_bundle.sh) where it runs, else builds it.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the directory for the results}"
mkdir -p "$OUT"
only="mixtral prefill up" skew=0 specs=";cluster=2;bm=192" hold=4
while [ $# -gt 0 ]; do
  case $1 in
    --only) only=$2; shift 2 ;;
    --skew) skew=$2; shift 2 ;;
    --specs) specs=$2; shift 2 ;;
    --hold) hold=$2; shift 2 ;;
    *) echo "gpu_power: unknown option $1" >&2; exit 2 ;;
  esac
done
BIN=.devbin/gpu_bench
"$BIN" --help > /dev/null 2>&1
if [ $? -ne 2 ]; then  # (its usage exits 2; a program that cannot run here exits otherwise)
  echo "gpu_power: building gpu_bench" >&2
  cmake -S . -B /tmp/ragdot-build -G Ninja -DCMAKE_BUILD_TYPE=Release -DRAGDOT_ENABLE_CUDA=ON > /dev/null &&
    cmake --build /tmp/ragdot-build --target gpu_bench -j"$(nproc)" > /dev/null || exit 1
  BIN=/tmp/ragdot-build/bench/gpu_bench
fi
rm -f "$OUT"/power_[0-9]*.json
nvidia-smi --query-gpu=timestamp,power.draw,clocks.sm,clocks_event_reasons.active --format=csv,noheader,nounits \
  -lms 100 > "$OUT/smi.csv" 2> "$OUT/smi.err" &
sampler=$!
IFS=';' read -ra raw <<< "$specs"
[ "${specs: -1}" = ";" ] && raw+=("")  # (read drops a trailing empty field)
[ ${#raw[@]} -eq 0 ] && raw=("")        # --specs "": the planner's kernel alone
list=()                                 # each spec once (";" would name the planner's kernel twice)
for spec in "${raw[@]}"; do
  dup=0
  for seen in "${list[@]+"${list[@]}"}"; do [ "$seen" = "$spec" ] && dup=1; done
  [ $dup = 0 ] && list+=("$spec")
done
i=0
for spec in "${list[@]}"; do
  echo "gpu_power: RAGDOT_CUDA_VARIANT=$spec" >&2
  RAGDOT_CUDA_VARIANT="$spec" timeout $((2 * ${hold%.*} + 180)) "$BIN" --only "$only" --skew "$skew" --reps 5 --no-peers \
    --hold "$hold" --json "$OUT/power_$i.json" 2>&1 | grep -E "^\[|  hold|  ragdot [0-9]" >&2
  i=$((i + 1))
done
kill "$sampler"
python3 bench/gpu_power.py --smi "$OUT/smi.csv" --bench "$OUT"/power_[0-9]*.json --md "$OUT/power_table.md" \
  --json "$OUT/power.json"
