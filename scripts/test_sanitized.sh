#!/usr/bin/env bash
# Runs the CPU tests under AddressSanitizer and UndefinedBehaviorSanitizer, then fuzzes describe,
# plan and execute for a bounded time. Both use clang (libFuzzer needs it) and their own build
# directories, with the GPU backends, tools and benchmarks off:
#   1. build-asan: the library and the C++ tests with -DRAGDOT_SANITIZE=address,undefined, then
#      `ctest -L cpu` there, less the two tests that sweep large shapes over every kernel (slow
#      under the sanitizers; the fuzzer runs every kernel on small shapes instead);
#   2. build-fuzz: tests/fuzz with -DRAGDOT_BUILD_FUZZ=ON (the library built with ASan, UBSan and
#      fuzzer coverage), run on a copy of tests/fuzz/corpus; it prints the number of executions.
#      By default it makes a fixed number of executions from a fixed seed, so that a test run
#      gives the same verdict on every machine; RAGDOT_FUZZ_SECONDS explores instead (a time
#      limit and a random seed), for runs that look for new findings.
# A finding fails the script; libFuzzer writes the input that caused it to build-fuzz/crash-*
# (add it to tests/fuzz/make_corpus.py as a seed once fixed).
# scripts/test.sh runs this script (RAGDOT_SKIP_SANITIZED=1 skips it there).
#
#   scripts/test_sanitized.sh
#   RAGDOT_FUZZ_SECONDS=1200 scripts/test_sanitized.sh    # explore for 20 minutes
#   RAGDOT_FUZZ_RUNS=0 scripts/test_sanitized.sh          # the sanitized tests only
#
# Settings (environment): RAGDOT_FUZZ_RUNS (default 100000), RAGDOT_FUZZ_SECONDS (unset),
# RAGDOT_SANITIZE_CXX (default clang++), RAGDOT_BUILD_JOBS (default: Ninja's choice).
set -euo pipefail
cd "$(dirname "$0")/.."

cxx=${RAGDOT_SANITIZE_CXX:-clang++}
fuzz_runs=${RAGDOT_FUZZ_RUNS:-100000}
fuzz_seconds=${RAGDOT_FUZZ_SECONDS:-}
if [ -n "$fuzz_seconds" ]; then
  [ "$fuzz_seconds" -gt 0 ] || fuzz_runs=0
  fuzz_limits=(-max_total_time="$fuzz_seconds")
  fuzz_what="${fuzz_seconds} s"
else
  fuzz_limits=(-runs="$fuzz_runs" -seed=1)
  fuzz_what="a fixed sequence (seed 1)"
fi
say() { echo "test_sanitized: $*" >&2; }
command -v "$cxx" > /dev/null || { say "$cxx is not installed (apt-get install clang libclang-rt-dev libomp-dev)"; exit 1; }

common=(-G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O2
  -DRAGDOT_ENABLE_CUDA=OFF -DRAGDOT_BUILD_TOOLS=OFF -DRAGDOT_BUILD_BENCH=OFF -DRAGDOT_BUILD_PYTHON=OFF)
build() { cmake --build "$1" ${RAGDOT_BUILD_JOBS:+--parallel "$RAGDOT_BUILD_JOBS"}; }
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

start=$SECONDS
cmake -S . -B build-asan "${common[@]}" -DRAGDOT_SANITIZE=address,undefined -DRAGDOT_BUILD_TESTS=ON
build build-asan
ctest --test-dir build-asan -L cpu --output-on-failure -j "$(nproc)" \
  -E '^CpuBackend\.(ShapedCases|RandomGeneralCases)EveryKernel$'
say "sanitized tests passed ($((SECONDS - start)) s)"

if [ "$fuzz_runs" -gt 0 ]; then
  start=$SECONDS
  cmake -S . -B build-fuzz "${common[@]}" -DRAGDOT_BUILD_FUZZ=ON -DRAGDOT_BUILD_TESTS=OFF
  build build-fuzz
  # The committed seeds stay as they are; what the fuzzer adds goes to a scratch corpus.
  rm -rf build-fuzz/corpus && mkdir -p build-fuzz/corpus
  cp tests/fuzz/corpus/* build-fuzz/corpus/
  log=build-fuzz/fuzz.log
  status=0
  (cd build-fuzz && RAGDOT_NUM_THREADS=2 ./tests/fuzz/ragdot_fuzz "${fuzz_limits[@]}" \
    -print_final_stats=1 -timeout=30 -rss_limit_mb=2048 corpus) > "$log" 2>&1 || status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  if [ "$status" -ne 0 ]; then
    tail -n 60 "$log" >&2
    say "the fuzzer found a problem after ${runs:-?} executions (input: build-fuzz/crash-* or leak-*/timeout-*)"
    exit 1
  fi
  say "fuzzing: ${runs:-?} executions of ${fuzz_what}, no finding ($((SECONDS - start)) s with the build)"
fi
