#!/usr/bin/env bash
# What a kernel change should be judged by, on a GPU machine: Nsight Compute's hardware counters
# for ragdot's group-GEMM kernel (and for the dense cuBLAS GEMM of the same case, the roof) on
# chosen benchmark cases, then a sweep of kernel variants (RAGDOT_CUDA_VARIANT) timed in one process
# beside the planner's own choice. Uses the programs of .devbin/ (scripts/gpu_bundle.sh).
# Writes ncu_<case>.txt, sweep.json and sweep.txt to $OUT.
#
#   OUT=/some/dir scripts/gpu_profile.sh [--cases "mixtral prefill up|deepseek-v3 prefill up"]
#                                        [--sweep "bn=128;bn=256,stages=3"] [--no-ncu]
#                                        [--variants "cluster=2;swap=ab"] [--torch] [--source]
#
# --variants also profiles ragdot's kernel under each RAGDOT_CUDA_VARIANT override on every case
# (ncu_<case>__<spec>.txt): what a variant changes in L2 bytes, throughput and stalls, beside the
# planner's choice. --torch profiles torch._grouped_mm's kernel (CUTLASS) on the first case
# (ncu_torch.txt): the peer's kernel of the same shapes and group sizes, weights [E, N, K].
# --source adds ncu's SourceCounters section: where in the machine code the warps stall, by
# sampled instruction (the tile boundary's costs show there, not in the kernel-wide averages).
# Besides the sections, every profile records the SM clock, the tensor pipe's active share, the
# sectors L2 sends to the SMs and all L2 sectors, and the warps' stall reasons per issue.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/gpu_log.sh profile_log.txt
cases="mixtral prefill up|deepseek-v3 prefill up|deepseek-v3 wgrad up|qwen3 prefill up|mixtral decode up"
sweep="" run_ncu=1 variants="" torch=0 source=0
while [ $# -gt 0 ]; do
  case $1 in
    --cases) cases=$2; shift ;;
    --sweep) sweep=$2; shift ;;
    --variants) variants=$2; shift ;;
    --torch) torch=1 ;;
    --source) source=1 ;;
    --no-ncu) run_ncu=0 ;;
  esac
  shift
done
BIN=.devbin
say "date $(date -u '+%F %T') commit $(cat $BIN/commit 2>/dev/null | tr '\n' ' ')"

if [ $run_ncu = 1 ]; then
  sections="--section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis
    --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats"
  [ $source = 1 ] && sections="$sections --section SourceCounters"
  metrics="--metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,lts__t_sectors.sum"
  metrics="$metrics,lts__t_sectors_srcunit_tex_op_read.sum,sm__cycles_elapsed.avg.per_second"
  metrics="$metrics,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
  metrics="$metrics,regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio"
  IFS='|' read -r -a list <<< "$cases"
  for c in "${list[@]}"; do
    slug=$(echo "$c" | tr ' ' '_' | tr -cd 'A-Za-z0-9_.-')
    say "ncu: $c"
    # the 4th launch of ragdot's kernel (the first ones load the module and warm the clocks)
    # shellcheck disable=SC2086  # one word per section flag
    timeout 240 ncu --clock-control none --kernel-name ragdot_group_gemm --launch-skip 3 --launch-count 1 $sections \
      $metrics \
      "$BIN/gpu_bench" --only "$c" --reps 3 --no-peers --json /tmp/profile_bench.json > "$OUT/ncu_$slug.txt" 2>&1
    echo "ncu $c exit $?" >> "$LOG"
    IFS=';' read -r -a specs <<< "$variants"
    for spec in "${specs[@]}"; do
      [ -n "$spec" ] || continue
      say "ncu: $c under $spec"
      # shellcheck disable=SC2086
      RAGDOT_CUDA_VARIANT=$spec timeout 240 ncu --clock-control none --kernel-name ragdot_group_gemm --launch-skip 3 \
        --launch-count 1 $sections $metrics \
        "$BIN/gpu_bench" --only "$c" --reps 3 --no-peers --json /tmp/profile_bench.json \
        > "$OUT/ncu_${slug}__$(echo "$spec" | tr -c 'A-Za-z0-9_.-' '_').txt" 2>&1
      echo "ncu $c under $spec exit $?" >> "$LOG"
    done
  done
  # the dense cuBLAS GEMM of the first case: what the same FLOPs look like on the vendor's kernel
  say "ncu: dense roof of ${list[0]}"
  # shellcheck disable=SC2086
  timeout 240 ncu --clock-control none --kernel-name regex:'^(nvjet|sm90|cutlass|xmma)' --launch-skip 3 \
    --launch-count 1 $sections $metrics \
    "$BIN/gpu_bench" --only "${list[0]}" --reps 3 --no-peers --json /tmp/profile_bench.json > "$OUT/ncu_dense.txt" 2>&1
  echo "ncu dense exit $?" >> "$LOG"
  if [ $torch = 1 ]; then
    # the peer's grouped GEMM on the first case's shapes and group sizes (gpu_peers.py reads them
    # from gpu_bench's JSON; its other kernels, cuBLAS and PyTorch's own, do not match the name)
    say "ncu: torch._grouped_mm on ${list[0]}"
    timeout 120 "$BIN/gpu_bench" --only "${list[0]}" --reps 3 --no-peers --json /tmp/profile_case.json > /dev/null 2>&1
    # shellcheck disable=SC2086
    timeout 300 ncu --clock-control none --kernel-name regex:'device_kernel|cutlass' --launch-skip 3 --launch-count 1 \
      $sections $metrics \
      python3 bench/gpu_peers.py --cases /tmp/profile_case.json --out /tmp/profile_peers.json --reps 5 \
      > "$OUT/ncu_torch.txt" 2>&1
    echo "ncu torch exit $?" >> "$LOG"
  fi
fi

if [ -n "$sweep" ]; then
  say "variant sweep: $sweep"
  timeout 400 "$BIN/gpu_bench" --no-peers --sweep "$sweep" --reps 10 --json "$OUT/sweep.json" 2> "$OUT/sweep.txt"
  echo "sweep exit $?" >> "$LOG"
fi
say "done"
