#!/usr/bin/env bash
# The one GPU job: runs the GPU tests (and compute-sanitizer on a reduced set), then benchmarks
# ragdot against its peers in the same run, and writes JSON plus a markdown table to $OUT.
# Uses the programs in .devbin/ (scripts/gpu_bundle.sh) when they run here, else builds them.
#
#   OUT=/some/dir scripts/gpu_check.sh [--no-tests] [--no-sanitizer] [--no-bench] [--quick] [--python]
#                                      [--skip REGEX] [--only REGEX] [--sweep SPECS] [--no-peers]
#                                      [--torch-peers] [--bench-limit SECONDS] [--jobs N] [--power]
#
# --jobs N runs N GPU tests side by side (default 1), each in its own process with twice its time
# limit; a kind's small tests, which gate its others, all finish before any gated test starts.
# At the end $OUT holds the log, the table, the merged JSON, its picture (gpu_results.png) and the
# sanitizer summary; everything else it wrote (test output, benchmark JSON, bounds, Python results)
# is packed into details.tgz. With peers, the benchmark ends with deepseek-v3's weight gradient on
# the vendor's kernels (bench/gpu_wgrad_bounds.py) and its strips with TMA stores (two and three
# box buffers) timed against the planner's register-store strips.
#
# --skip leaves out the GPU tests whose Suite.Name matches REGEX (e.g. a slow one already run);
# --only runs only those that match. --no-peers benchmarks ragdot's cuda backend and the dense
# roof alone (no cuBLAS, PyTorch or JAX peers): with --only it measures kernel variants in one
# short call, e.g. --only 'ClusterPairs|TmaStore|TileBlocks|Swiglu|ScatterAdd|EmptyDimensions' --no-sanitizer
# --no-peers. --torch-peers: of the peers only torch._grouped_mm and its padded baseline (gpu_bench
# then times ragdot and the dense roof alone, and no JAX): the ratios the targets name, in less
# device time. --bench-limit: gpu_bench's time limit (default 400 s; its JSON keeps the cases it
# finished).
# --sweep times the cuda backend again under each RAGDOT_CUDA_VARIANT override in SPECS
# (';'-separated) beside the planner's choice, on every benchmark case where it changes the kernel
# (default "swap=off;order=mix;split=tail;strips=on;strips=off;measure": the plain tile where the
# planner swaps operands (deepseek-v3's prefill), mode 1's groups in the mixed order
# (tile_order.h), the Hopper family's last wave split along k, the weight gradient in strips that
# keep B in shared memory where the planner does not, and one tile per unit where it does;
# "measure": a measured plan, PlanningEffort::kMeasure, with the case's group sizes; "" for none). swap=ab elsewhere lost on every case (bench/RESULTS.md, 2026-12-06). The variants timed on 2026-12-05 and -06 (bench/RESULTS.md), slower than the
# planner's choice everywhere, stay out of the default to save device time, as do the weight
# gradient's turns ("strips=on,pingpong=on", slower on an H100 and an H200, 2026-12-07) and mode
# 1's overlapped stores ("overlap=on", no faster on an H200, 2026-12-07) and the 192 x 192 tile
# ("bm=192", faster in single launches, level at an H100's power cap, 2026-12-07) and the swapped
# tile in m pairs ("swap=ab,cluster=2", 9% fewer L2 bytes on skewed deepseek-v3 at the same time,
# 0.95x uniform, an H100, 2026-12-07): "cluster=2;cluster=2n;
# cluster=4;raster=25600;epilogue=tma;epilogue=tma,bn=192;bn=128" (CTA pairs along m and along n,
# 2 x 2 clusters, a large group's tiles in blocks whose rows fit in 25 MiB of L2, the TMA-store
# epilogue of both modes, at bn 192 too, 128-wide tiles).
# --power adds, after the benchmark, the board's power, clocks and joules per run of the planner's
# kernel, its opt-in neighbours and the dense roof, each held back to back for seconds
# (scripts/gpu_power.sh on mixtral's and qwen3's up projections: power_table.md): sustained runs
# sit at the power cap, where time follows energy per operation.
# --python adds, after everything else, the Python bindings' GPU tests and MoE step benchmark
# (scripts/gpu_python.sh; needs nanobind, jax with CUDA, and PyTorch or CuPy installed there).
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/gpu_log.sh log.txt
bench_limit=400 parallel=1 run_tests=1 run_bench=1 run_sanitizer=1 run_python=0 run_power=0 quick="" skip='^$' only='.*' peers=1 sweep='swap=off;order=mix;split=tail;strips=on;strips=off;measure'
while [ $# -gt 0 ]; do
  a=$1
  shift
  case $a in
    --skip) skip=$1; shift ;;
    --only) only=$1; shift ;;
    --no-peers) peers=0 ;;
    --torch-peers) peers=torch ;;
    --bench-limit) bench_limit=$1; shift ;;
    --jobs) parallel=$1; shift ;;
    --sweep) sweep=$1; shift ;;
    --no-tests) run_tests=0 ;;
    --no-bench) run_bench=0 ;;
    --no-sanitizer) run_sanitizer=0 ;;
    --quick) quick="--quick" ;;
    --python) run_python=1 ;;
    --power) run_power=1 ;;
  esac
done
say "date $(date -u '+%F %T') commit $(cat .devbin/commit 2>/dev/null | tr '\n' ' ')"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader >> "$LOG" 2>&1

BIN=.devbin
if ! "$BIN/test_cuda_codegen" --gtest_list_tests > /dev/null 2>&1 || [ ! -x "$BIN/test_cublas_backend" ] ||
   [ ! -x "$BIN/test_moe_device" ] || [ ! -x "$BIN/test_moe_expert_parallel" ]; then
  say "carried programs do not run here; building"
  cmake -S . -B /tmp/ragdot-build -G Ninja -DCMAKE_BUILD_TYPE=Release -DRAGDOT_ENABLE_CUDA=ON >> "$LOG" 2>&1
  cmake --build /tmp/ragdot-build --target test_cuda_backend test_cublas_backend test_moe_device test_cuda_codegen test_cublas_host \
    test_ep_nccl test_moe_expert_parallel gpu_bench -j16 >> "$LOG" 2>&1
  mkdir -p /tmp/ragdot-bin
  cp /tmp/ragdot-build/tests/cpp/test_cuda_backend /tmp/ragdot-build/tests/cpp/test_cublas_backend /tmp/ragdot-build/tests/cpp/test_moe_device \
     /tmp/ragdot-build/tests/cpp/test_cuda_codegen /tmp/ragdot-build/tests/cpp/test_cublas_host \
     /tmp/ragdot-build/tests/cpp/test_ep_nccl /tmp/ragdot-build/tests/cpp/test_moe_expert_parallel \
     /tmp/ragdot-build/bench/gpu_bench /tmp/ragdot-bin/ 2>>"$LOG"
  BIN=/tmp/ragdot-bin
fi

if [ $run_tests = 1 ]; then
  say "GPU tests$([ "$parallel" -gt 1 ] && echo " ($parallel at a time)")"
  # one process per test, each with its own time limit, so that a hang names its test
  : > "$OUT/gpu_tests.txt"
  # the expert-parallel tests run one rank in this process, and their one-process-per-GPU launcher
  # with RAGDOT_EP_RANKS ranks (default 1 here; every GPU on a multi-GPU machine when it is unset there)
  [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -le 1 ] && export RAGDOT_EP_RANKS=${RAGDOT_EP_RANKS:-1}
  # CTA pairs, split tiles and swapped operands: a protocol between CTAs (or a new tile) that
  # deadlocks hangs its test. The few cases of each kind run first on a short limit; the kind's
  # other tests only if they passed. gates_of TEST: the small tests that must pass before it.
  gates_of() {
    case $1 in
      *HopperGatheredRows | *HopperGatheredRowsOneCta) echo CudaBackend.HopperGatheredRowsSmall ;;
      *HopperGatheredWeightGradient) echo CudaBackend.HopperGatheredWeightGradientSmall ;;
      *ClusterPairsAlong*) echo "${1/ClusterPairs/ClusterPairsSmall}" ;;
      *HopperSplitTail | *HopperSplitTailCountsItsPieces) echo CudaBackend.HopperSplitTailSmall ;;
      *HopperSwappedOperands | *HopperSwappedPairs | *HopperWeightGradientStrips | *HopperWeightGradientStripsTmaStore | \
        *HopperWeightGradientTurns | *HopperForwardTmaStore | \
        *HopperMixedOrder | *HopperOverlappedStores | *HopperThreeConsumers) echo "${1}Small" ;;
      *HopperSwappedByDefault) echo CudaBackend.HopperSwappedOperandsSmall ;;
      # measured plans time every kind of candidate: only once each kind's small cases passed
      *MeasuredPlans*) echo CudaBackend.HopperSplitTailSmall CudaBackend.HopperSwappedOperandsSmall \
        CudaBackend.HopperWeightGradientStripsSmall CudaBackend.HopperWeightGradientTmaStoreSmall ;;
    esac
  }
  limit_of() {
    case $1 in
      *HopperSplitTail | *HopperWeightGradientStrips | *HopperWeightGradientStripsTmaStore | *HopperGatheredRows* | \
        *MeasuredPlans*) echo 300 ;;
      *ClusterPairsSmall* | *SplitTailSmall | *SwappedOperandsSmall | *SwappedPairsSmall | *WeightGradientStripsSmall | \
        *WeightGradientStripsTmaStoreSmall | \
        *WeightGradientTurnsSmall | *MixedOrderSmall | *GatheredWeightGradientSmall | *OverlappedStoresSmall | \
        *ThreeConsumersSmall) echo 60 ;;
      *) echo 150 ;;
    esac
  }
  # each test's output and verdict go to files of their own (numbered in list order), so that tests
  # run side by side (--jobs) do not interleave; gpu_tests.txt gets them in list order at the end
  tests_dir=$(mktemp -d)
  run_test() {  # PROG TEST NUMBER
    local t=$2 f=$tests_dir/$3 gate gate_failed="" limit start rc
    for gate in $(gates_of "$t"); do cat "$tests_dir"/*.verdict 2>/dev/null | grep -q "^$gate exit 0" || gate_failed=$gate; done
    if [ -n "$gate_failed" ]; then
      echo "$t skipped (its small cases did not pass: $gate_failed)" > "$f.verdict"
      return
    fi
    limit=$(limit_of "$t")
    # side by side, each test gets a share of the GPU: twice the time
    [ "$parallel" -gt 1 ] && limit=$((limit * 2))
    start=$(date +%s)
    timeout "$limit" "$BIN/$1" --gtest_filter="$t" > "$f.out" 2>&1
    rc=$?
    { [ $rc = 124 ] && echo "$t timed out after ${limit}s"
      echo "$t exit $rc ($(( $(date +%s) - start ))s)"; } > "$f.verdict.tmp"
    mv "$f.verdict.tmp" "$f.verdict"
  }
  # the tests in list order; those with gates run after all the others have finished
  free=() gated=() number=0
  for prog in test_cuda_backend test_cublas_backend test_moe_device test_ep_nccl test_moe_expert_parallel; do
    for t in $("$BIN/$prog" --gtest_list_tests | awk '/^[^ ]/{suite=$1} /^  /{print suite $1}'); do
      number=$((number + 1))
      n=$(printf %04d $number)
      if [[ $t =~ $skip ]]; then echo "$t skipped (--skip)" > "$tests_dir/$n.verdict"; continue; fi
      [[ $t =~ $only ]] || continue
      if [ -n "$(gates_of "$t")" ]; then gated+=("$prog $t $n"); else free+=("$prog $t $n"); fi
    done
  done
  for phase in free gated; do
    declare -n list=$phase
    for entry in "${list[@]}"; do
      while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n; done
      # shellcheck disable=SC2086  # PROG TEST NUMBER
      run_test $entry &
    done
    wait
  done
  for f in "$tests_dir"/*.verdict; do  # (numbered: the glob gives list order)
    [ -e "$f" ] || continue
    [ -e "${f%.verdict}.out" ] && cat "${f%.verdict}.out" >> "$OUT/gpu_tests.txt"
    tee -a "$LOG" < "$f" >> "$OUT/gpu_tests.txt"
  done
  rm -rf "$tests_dir"
  # the cublas backend's host side with a GPU present (availability checks then skip themselves)
  if [ "$only" = '.*' ]; then
    timeout 60 "$BIN/test_cublas_host" >> "$OUT/gpu_tests.txt" 2>&1
    echo "test_cublas_host exit $?" | tee -a "$LOG" >> "$OUT/gpu_tests.txt"
  fi
fi
if [ $run_bench = 1 ]; then
  say "benchmark: ragdot$([ $peers = 1 ] && echo ' + cuBLAS peers' || echo ' and the dense roof')$([ $peers = torch ] && echo ', then torch')"
  rm -f /tmp/peers_torch.json /tmp/peers_jax.json
  # variants whose tests did not pass (or did not run) stay out of the sweep: a hang there would
  # cost the whole benchmark. A kind's small test passing is enough when its matrix did not run
  # (--only 'Small'), so that one call can test the new kinds and time them.
  if [ $run_tests = 1 ]; then
    for axis in ClusterPairsAlongM:cluster=2 ClusterPairsAlongN:cluster=2n ClusterPairsAlongMN:cluster=4 \
                WeightGradientTmaStore:epilogue=tma ForwardTmaStore:epilogue=tma SplitTail:split=tail 'SwappedOperands:swap=[a-z]+' \
                WeightGradientStrips:strips=on WeightGradientTurns:pingpong=on 'MixedOrder:order=[a-z]+' \
                OverlappedStores:overlap=on ThreeConsumers:bm=192 SwappedPairs:swap=ab,cluster=2; do
      name=Hopper${axis%%:*}
      small_name=${name/ClusterPairs/ClusterPairsSmall}
      [ "$small_name" = "$name" ] && small_name=${name}Small
      if grep -qE "$name exit [1-9]|$name timed out" "$OUT/gpu_tests.txt" ||
         ! grep -qE "($name|$small_name) exit 0" "$OUT/gpu_tests.txt"; then
        sweep=$(echo "$sweep" | tr ';' '\n' | grep -vE "(^|,)${axis#*:}(,|$)" | paste -sd ';' -)
        say "sweep: ${axis#*:} left out, its GPU tests did not pass"
      fi
    done
    if [[ ";$sweep;" == *";measure;"* ]] && ! grep -q "MeasuredPlansMatchTheOracleAndAreKept exit 0" "$OUT/gpu_tests.txt"; then
      sweep=$(echo "$sweep" | tr ';' '\n' | grep -vx measure | paste -sd ';' -)
      say "sweep: measure left out, its GPU test did not pass"
    fi
  fi
  sweep_args=()
  [ -n "$sweep" ] && sweep_args=(--sweep "$sweep")
  peer_args=""
  if [ $peers = torch ]; then
    timeout "$bench_limit" "$BIN/gpu_bench" --json "$OUT/bench_ragdot.json" $quick --no-peers "${sweep_args[@]}" 2>&1 |
      tee -a "$LOG" >&2
    say "benchmark: torch peers"
    timeout 200 python3 bench/gpu_peers.py --cases "$OUT/bench_ragdot.json" --out /tmp/peers_torch.json 2>>"$LOG"
    [ -s /tmp/peers_torch.json ] && peer_args="--peers /tmp/peers_torch.json"
  elif [ $peers = 1 ]; then
    timeout "$bench_limit" "$BIN/gpu_bench" --json "$OUT/bench_ragdot.json" $quick "${sweep_args[@]}" 2>&1 | tee -a "$LOG" >&2
    say "benchmark: torch peers"
    timeout 200 python3 bench/gpu_peers.py --cases "$OUT/bench_ragdot.json" --out /tmp/peers_torch.json 2>>"$LOG"
    say "benchmark: jax peers"
    timeout 200 python3 bench/gpu_peers.py --cases "$OUT/bench_ragdot.json" --out /tmp/peers_jax.json --jax 2>>"$LOG"
    for p in /tmp/peers_torch.json /tmp/peers_jax.json; do [ -s $p ] && peer_args="$peer_args --peers $p"; done
  else
    timeout "$bench_limit" "$BIN/gpu_bench" --json "$OUT/bench_ragdot.json" $quick --no-peers "${sweep_args[@]}" 2>&1 |
      tee -a "$LOG" >&2
  fi
  python3 bench/gpu_report.py --bench "$OUT/bench_ragdot.json" $peer_args --json "$OUT/gpu_results.json" \
    --md "$OUT/gpu_table.md" --commit "$(head -1 .devbin/commit 2>/dev/null)" >> "$LOG" 2>&1
  # the same as a picture: every case's bars as shares of its roof (needs matplotlib)
  python3 bench/gpu_plot.py --results "$OUT/gpu_results.json" --png "$OUT/gpu_results.png" >> "$LOG" 2>&1
  if [ $peers != 0 ]; then
    # deepseek-v3's weight-gradient output and FLOPs on the vendor's kernels (cuBLAS bmm with every
    # group exactly 128 rows, torch._grouped_mm, a plain fill of the output, the dense GEMM): what
    # bounds that case, beside ragdot's time for it above
    say "benchmark: the weight gradient's bounds"
    timeout 120 python3 bench/gpu_wgrad_bounds.py --out "$OUT/wgrad_bounds.json" > "$OUT/wgrad_bounds.txt" 2>>"$LOG"
    # and its strips with the TMA-store epilogue (opt-in; two and three box buffers), in alternated
    # rounds with the planner's register-store strips: the lever for the gap to cuBLAS's batched
    # GEMM, which stores that way
    say "benchmark: the weight gradient's strips with TMA stores"
    timeout 150 "$BIN/gpu_bench" --json "$OUT/wgrad_sweep.json" --only "deepseek-v3 wgrad" --no-peers \
      --sweep "epilogue=tma;epilogue=tma,buffers=3" 2>&1 | grep -E "sweep|ragdot " | tee -a "$LOG" >&2
  fi
fi
if [ $run_tests = 1 ] && [ $run_sanitizer = 1 ]; then
  say "compute-sanitizer (reduced set)"
  # every kernel family once (EveryFamily...), graph replay, clamping (64-bit sizes too), batch dims, checked mode
  # (RAGDOT_SANITIZE_FILTER replaces this gtest filter, e.g. to run the family matrix alone)
  filter=${RAGDOT_SANITIZE_FILTER:-'CudaBackend.EveryFamily*:CudaBackend.GraphCaptureReplaysWithNewGroupSizes:CudaBackend.UncheckedMode*:CudaBackend.BatchModeAndBatchDims:CudaBackend.CheckedMode*'}
  # CTA pairs too, each kind once its matrix passed (a pair protocol that hangs would hang here
  # three times over)
  for axis in M N MN; do
    if [ -z "${RAGDOT_SANITIZE_FILTER:-}" ] && grep -q "HopperClusterPairsAlong$axis exit 0" "$OUT/gpu_tests.txt"; then
      filter="$filter:CudaBackend.HopperClusterPairsSmallAlong$axis"
    fi
  done
  # the TMA-store, SwiGLU and scatter epilogues and split tiles, likewise once their matrices passed
  for small in HopperWeightGradientTmaStore HopperForwardTmaStore HopperSwigluEpilogue HopperScatterAddRows \
               HopperSplitTail HopperSwappedOperands HopperSwappedPairs HopperWeightGradientStrips \
               HopperWeightGradientStripsTmaStore HopperMixedOrder HopperGatheredRows \
               HopperGatheredWeightGradient; do
    if [ -z "${RAGDOT_SANITIZE_FILTER:-}" ] && grep -q "$small exit 0" "$OUT/gpu_tests.txt"; then
      filter="$filter:CudaBackend.${small}Small"
    fi
  done
  # gathered pairs whose CTAs have no columns (only an override makes those), once they passed
  if [ -z "${RAGDOT_SANITIZE_FILTER:-}" ] && grep -q "HopperGatheredRowsSmallForcedPairs exit 0" "$OUT/gpu_tests.txt"; then
    filter="$filter:CudaBackend.HopperGatheredRowsSmallForcedPairs"
  fi
  # split tiles on grids capped at a few CTAs, whole waves before the split one (known splits)
  if [ -z "${RAGDOT_SANITIZE_FILTER:-}" ] && grep -q "HopperSplitTailCountsItsPieces exit 0" "$OUT/gpu_tests.txt"; then
    filter="$filter:CudaBackend.HopperSplitTailCountsItsPieces"
  fi
  for tool in memcheck racecheck synccheck; do
    timeout 200 compute-sanitizer --tool $tool --error-exitcode 3 "$BIN/test_cuda_backend" --gtest_filter="$filter" \
      > "$OUT/sanitizer_$tool.txt" 2>&1
    echo "$tool exit $? : $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.txt" | tail -1)" >> "$LOG"
    # RAGDOT_SANITIZE_CUBLAS=0 leaves out the cublas and GPU padded backends (vendor kernels)
    if [ "${RAGDOT_SANITIZE_CUBLAS:-1}" != 0 ]; then
      timeout 200 compute-sanitizer --tool $tool --error-exitcode 3 "$BIN/test_cublas_backend" \
        --gtest_filter='CublasBackend.RejectsBadGroupSizesWithoutWriting:CublasBackend.PlanSays*:PaddedGpu.Capacity*:PaddedGpu.DroplessNeeds*' \
        > "$OUT/sanitizer_cublas_$tool.txt" 2>&1
      echo "$tool (cublas, padded) exit $? : $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_cublas_$tool.txt" | tail -1)" >> "$LOG"
    fi
    timeout 200 compute-sanitizer --tool $tool --error-exitcode 3 "$BIN/test_moe_device" \
      --gtest_filter='MoeDevicePermutation.GatherAndCombine*:MoeDevicePermutation.Rejects*:MoeDevicePermutation.SortSmall:MoeDevicePermutation.FinishCombine*:MoeDevicePermutation.CombineBackward*:MoeDeviceOps.*' \
      > "$OUT/sanitizer_moe_$tool.txt" 2>&1
    echo "$tool (moe kernels) exit $? : $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_moe_$tool.txt" | tail -1)" >> "$LOG"
  done
  # the sort writes every output and reads its workspace with no memset before it: initcheck says
  # whether a kernel reads memory nothing wrote
  timeout 200 compute-sanitizer --tool initcheck --error-exitcode 3 "$BIN/test_moe_device" \
    --gtest_filter='MoeDevicePermutation.SortSmall' > "$OUT/sanitizer_moe_initcheck.txt" 2>&1
  echo "initcheck (moe sort) exit $? : $(grep -E 'ERROR SUMMARY' "$OUT/sanitizer_moe_initcheck.txt" | tail -1)" >> "$LOG"
  cat "$OUT"/sanitizer_*.txt | grep -E "SUMMARY|Invalid|Race|error|Uninitialized" | head -40 > "$OUT/sanitizer.txt"
  rm -f "$OUT"/sanitizer_memcheck.txt "$OUT"/sanitizer_racecheck.txt "$OUT"/sanitizer_synccheck.txt \
    "$OUT"/sanitizer_cublas_*.txt "$OUT"/sanitizer_moe_*.txt
fi

# ---- optional: power, clocks and joules per run under a sustained load (--power) ----
if [ $run_power = 1 ]; then
  say "power under a sustained load (scripts/gpu_power.sh)"
  for c in "mixtral prefill up" "qwen3 prefill up"; do
    OUT=/tmp/ragdot-power scripts/gpu_power.sh --only "$c" --specs ";cluster=2n;bm=192" 2>> "$LOG" >> "$OUT/power_table.md"
    echo "power $c exit $?" >> "$LOG"
  done
fi

# ---- optional: the Python bindings (--python) ----
if [ $run_python = 1 ]; then
  say "Python bindings (scripts/gpu_python.sh)"
  OUT=$OUT scripts/gpu_python.sh $quick $([ $run_bench = 1 ] || echo --no-bench) 2>&1 | tee -a "$LOG" >&2
fi

# a few files to read first, the rest in one archive
details=()
for f in "$OUT"/*; do
  case ${f##*/} in log.txt | gpu_table.md | gpu_results.json | gpu_results.png | sanitizer.txt | power_table.md | details.tgz) ;; *) [ -e "$f" ] && details+=("${f##*/}") ;; esac
done
[ ${#details[@]} -gt 0 ] && tar czf "$OUT/details.tgz" -C "$OUT" "${details[@]}" && (cd "$OUT" && rm -rf "${details[@]}")
say "done"
