#!/usr/bin/env bash
# The MoE layer on a GPU in one run: the device layer's GPU tests (every preset against the host
# layer, forward and backward; graph capture; the padded baselines; the layer's kernels), then
# `ragdot layer --backend cuda --json` on qwen3-30b-a3b and deepseek-v3 at 4096 and 8192 tokens and
# on mixtral-8x7b and llama4-scout at 4096 (each beside the GPU padded baselines), then the same
# layers as a PyTorch eager layer on torch._grouped_mm and a jitted JAX layer on
# jax.lax.ragged_dot (bench/moe_layer_peers.py), and one JSON and markdown table of the ratios and
# the issue's targets (bench/moe_layer_report.py). Everything goes to $OUT:
#
#   layer_log.txt            what ran, exit codes
#   layer_tests.txt          the GPU tests' output
#   layer_runs.txt           ragdot layer's printed reports
#   layer_<preset>_<T>.json  ragdot layer's JSON per case
#   peers_torch.json, peers_jax.json
#   layer_results.json, layer_table.md   the merged report
#   ep_layer.txt             the expert-parallel layer forward on 1, 2, 4, ... GPUs (bench/ep_bench --layer)
#   layer_variants.md        with --variant: the layer under each RAGDOT_CUDA_VARIANT beside the default
#
#   OUT=/some/dir scripts/gpu_layer.sh [--quick] [--no-tests] [--no-peers] [--no-jax] [--no-ep] [--sanitizer]
#                                      [--variant "cluster=2;cluster=2n"] [--cases "qwen3-30b-a3b:4096 ..."]
#
# --cases: the space-separated preset:tokens cases to time (default the six above); --no-ep leaves
# out the expert-parallel layer (on one GPU it is the one-rank exchange, already recorded).
# --quick: 5 timed repetitions instead of 10 (3 for JAX) and a 120 s budget for the JAX peer (cases
# past it are recorded as skipped); about 4 to 5 minutes on an H200 with a warm kernel cache.
# --sanitizer adds compute-sanitizer memcheck on the smallest layer test. --variant runs each case
# again (ragdot's path only) under each ';'-separated RAGDOT_CUDA_VARIANT override, in the same
# run, and tabulates forward, forward + backward and the permutation share against the default; a
# spec is space-separated words: RAGDOT_NAME=VALUE sets that variable, --option is passed to
# ragdot layer (--fused-swiglu, --fused-combine, --fused-gather), any other word is a
# RAGDOT_CUDA_VARIANT spec, e.g. --variant "cluster=2;RAGDOT_MOE_SORT=one_block RAGDOT_MOE_ROWS=warps
# --fused-swiglu --fused-combine". Uses the programs in
# .devbin/ (scripts/gpu_bundle.sh) when they run here, else builds them.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu_log.sh layer_log.txt
quick=0 tests=1 peers=1 jax=1 ep=1 sanitizer=0 variants=""
cases="qwen3-30b-a3b:4096 qwen3-30b-a3b:8192 deepseek-v3:4096 deepseek-v3:8192 mixtral-8x7b:4096 llama4-scout:4096"
next_is=""
for a in "$@"; do
  if [ "$next_is" = variant ]; then variants=$a; next_is=""; continue; fi
  if [ "$next_is" = cases ]; then cases=$a; next_is=""; continue; fi
  case $a in
    --variant) next_is=variant ;;
    --cases) next_is=cases ;;
    --quick) quick=1 ;;
    --no-tests) tests=0 ;;
    --no-peers) peers=0 ;;
    --no-jax) jax=0 ;;
    --no-ep) ep=0 ;;
    --sanitizer) sanitizer=1 ;;
    *) say "unknown option $a"; exit 2 ;;
  esac
done
PY=${RAGDOT_PYTHON:-python3}
start=$(date +%s)
elapsed() { echo "$(( $(date +%s) - start ))s"; }
commit=$(head -1 .devbin/commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)
say "date $(date -u '+%F %T') commit $commit"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> "$LOG" 2>&1

BIN=.devbin
if ! "$BIN/test_moe_layer_device" --gtest_list_tests > /dev/null 2>&1 || ! "$BIN/ragdot" info > /dev/null 2>&1; then
  say "carried programs missing or not runnable here; building"
  build=/tmp/ragdot-layer-build
  if ! { cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DRAGDOT_ENABLE_CUDA=ON &&
         cmake --build $build --target ragdot_cli test_moe_layer_device test_moe_device -j"$(nproc)"; } >> "$LOG" 2>&1; then
    say "build failed (see layer_log.txt)"
    exit 1
  fi
  BIN=/tmp/ragdot-layer-bin
  mkdir -p $BIN
  cp $build/tools/ragdot $build/tests/cpp/test_moe_layer_device $build/tests/cpp/test_moe_device $BIN/
  say "built ($(elapsed))"
fi

if [ $quick = 1 ]; then reps=5 jax_reps=3 jax_budget=120; else reps=10 jax_reps=5 jax_budget=0; fi

if [ $tests = 1 ]; then
  say "GPU tests: the device MoE layer and its kernels"
  : > "$OUT/layer_tests.txt"
  # one process per test, each with its own time limit, so that a hang names its test
  for prog in test_moe_layer_device test_moe_device; do
    filter='*'
    [ $prog = test_moe_device ] && filter='MoeDeviceOps.*:MoeDevicePermutation.*:MoeDeviceFill.*'
    for t in $("$BIN/$prog" --gtest_filter="$filter" --gtest_list_tests | awk '/^[^ ]/{suite=$1} /^  /{print suite $1}'); do
      t0=$(date +%s)
      timeout 180 "$BIN/$prog" --gtest_filter="$t" >> "$OUT/layer_tests.txt" 2>&1
      rc=$?
      echo "$t exit $rc ($(( $(date +%s) - t0 ))s)" | tee -a "$LOG" >> "$OUT/layer_tests.txt"
    done
  done
  # the whole layer with the one-block sort and the warp row kernels (RAGDOT_MOE_SORT, RAGDOT_MOE_ROWS),
  # every preset and graph replay
  t0=$(date +%s)
  RAGDOT_MOE_SORT=one_block RAGDOT_MOE_ROWS=warps timeout 300 "$BIN/test_moe_layer_device" \
    --gtest_filter='Presets/DeviceMoeLayerTest.*:DeviceMoeLayer.GraphCapture*' >> "$OUT/layer_tests.txt" 2>&1
  echo "layer tests under RAGDOT_MOE_SORT=one_block RAGDOT_MOE_ROWS=warps exit $? ($(( $(date +%s) - t0 ))s)" |
    tee -a "$LOG" >> "$OUT/layer_tests.txt"
  # and with the Hopper family's opt-in tiles: swapped operands (the layer's plain expert GEMMs,
  # forward and data gradients, both weight layouts), the last wave split along k, and the weight
  # gradients in strips
  for spec in swap=ab split=tail strips=on; do
    t0=$(date +%s)
    RAGDOT_CUDA_VARIANT=$spec timeout 300 "$BIN/test_moe_layer_device" \
      --gtest_filter='Presets/DeviceMoeLayerTest.*:DeviceMoeLayer.GraphCapture*' >> "$OUT/layer_tests.txt" 2>&1
    echo "layer tests under RAGDOT_CUDA_VARIANT=$spec exit $? ($(( $(date +%s) - t0 ))s)" |
      tee -a "$LOG" >> "$OUT/layer_tests.txt"
  done
  say "GPU tests done ($(elapsed)): $(grep -c ' exit 0 ' "$OUT/layer_tests.txt") passed, $(grep -cE ' exit [1-9]' "$OUT/layer_tests.txt") failed"
  if [ $sanitizer = 1 ]; then
    timeout 300 compute-sanitizer --tool memcheck --error-exitcode 3 "$BIN/test_moe_layer_device" \
      --gtest_filter='Presets/DeviceMoeLayerTest.*qwen3*:DeviceMoeLayer.RejectsBadArguments' > "$OUT/layer_memcheck.txt" 2>&1
    echo "memcheck exit $? : $(grep -E 'ERROR SUMMARY' "$OUT/layer_memcheck.txt" | tail -1)" | tee -a "$LOG" >&2
  fi
fi

say "ragdot layer --backend cuda on $cases"
: > "$OUT/layer_runs.txt"
layer_args=()
for c in $cases; do
  preset=${c%%:*} tokens=${c##*:}
  f="$OUT/layer_${preset}_${tokens}.json"
  timeout 300 "$BIN/ragdot" layer --backend cuda --model "$preset" --tokens "$tokens" --reps $reps --json "$f" \
    >> "$OUT/layer_runs.txt" 2>&1
  echo "ragdot layer $preset $tokens exit $? ($(elapsed))" | tee -a "$LOG" >> "$OUT/layer_runs.txt"
  layer_args+=(--layer "$f")
done

# the same layers under kernel-variant overrides (ragdot's path only), beside the default runs above
if [ -n "$variants" ]; then
  say "ragdot layer under RAGDOT_CUDA_VARIANT: $variants"
  variant_args=()
  IFS=';' read -ra specs <<< "$variants"
  for spec in "${specs[@]}"; do
    tag=$(echo "$spec" | tr -c 'A-Za-z0-9\n' '_')
    for c in $cases; do
      preset=${c%%:*} tokens=${c##*:}
      f="$OUT/layer_${preset}_${tokens}_${tag}.json"
      # each word of a spec: RAGDOT_NAME=VALUE sets that variable, --option goes to ragdot layer
      # (--fused-swiglu, --fused-combine, --fused-gather), anything else is a RAGDOT_CUDA_VARIANT spec
      assignments=() options=()
      read -ra words <<< "$spec"
      for w in "${words[@]}"; do
        case $w in
          RAGDOT_*=*) assignments+=("$w") ;;
          --*) options+=("$w") ;;
          *) assignments+=("RAGDOT_CUDA_VARIANT=$w") ;;
        esac
      done
      env "${assignments[@]}" timeout 120 "$BIN/ragdot" layer --backend cuda --model "$preset" --tokens "$tokens" \
        --reps $reps --no-baseline "${options[@]}" --json "$f" >> "$OUT/layer_runs.txt" 2>&1
      echo "ragdot layer $preset $tokens under $spec exit $? ($(elapsed))" | tee -a "$LOG" >> "$OUT/layer_runs.txt"
      variant_args+=("--variant=$spec=$f")  # (one argument: a spec may start with --)
    done
  done
  "$PY" bench/moe_layer_report.py "${layer_args[@]}" "${variant_args[@]}" --variants-md "$OUT/layer_variants.md" \
    --json /dev/null --md /dev/null >> "$LOG" 2>&1
  cat "$OUT/layer_variants.md" >&2 2> /dev/null
fi

# expert parallelism: the whole layer forward with E / W experts per GPU, tokens/s from 1 to all GPUs
if [ $ep = 1 ] && [ -x "$BIN/ep_bench" ]; then
  say "expert-parallel layer forward (ep_bench --layer)"
  : > "$OUT/ep_layer.txt"
  for preset in deepseek-v3 qwen3-30b-a3b; do
    timeout 300 "$BIN/ep_bench" --layer --preset $preset --tokens-per-rank 4096 --reps $reps >> "$OUT/ep_layer.txt" 2>&1
    echo "ep_bench --layer $preset exit $? ($(elapsed))" | tee -a "$LOG" >> "$OUT/ep_layer.txt"
  done
fi

peer_args=()
if [ $peers = 1 ]; then
  say "PyTorch eager layer on torch._grouped_mm"
  timeout 400 "$PY" bench/moe_layer_peers.py --framework torch --cases "${cases// /,}" --reps $reps \
    --json "$OUT/peers_torch.json" 2>> "$LOG"
  echo "torch peers exit $? ($(elapsed))" >> "$LOG"
  peer_args+=(--peers "$OUT/peers_torch.json")
  if [ $jax = 1 ]; then
    say "JAX layer on jax.lax.ragged_dot (jit)"
    # the target presets first; deepseek-v3 at 8192 last (XLA's dense expansion runs out of memory at 4096 already)
    jax_cases=""
    for c in qwen3-30b-a3b:4096 qwen3-30b-a3b:8192 deepseek-v3:4096 mixtral-8x7b:4096 llama4-scout:4096 deepseek-v3:8192 $cases; do
      [[ " $cases " == *" $c "* && ",$jax_cases," != *",$c,"* ]] && jax_cases=${jax_cases:+$jax_cases,}$c
    done
    XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.9} timeout 500 "$PY" bench/moe_layer_peers.py \
      --framework jax --cases $jax_cases --reps $jax_reps --warmup 1 --budget-seconds $jax_budget \
      --json "$OUT/peers_jax.json" 2>> "$LOG"
    echo "jax peers exit $? ($(elapsed))" >> "$LOG"
    peer_args+=(--peers "$OUT/peers_jax.json")
  fi
fi

say "report"
"$PY" bench/moe_layer_report.py "${layer_args[@]}" "${peer_args[@]}" --json "$OUT/layer_results.json" \
  --md "$OUT/layer_table.md" --commit "$commit" >> "$LOG" 2>&1
echo "report exit $?" >> "$LOG"
cat "$OUT/layer_table.md" >&2 2> /dev/null
say "done ($(elapsed))"
