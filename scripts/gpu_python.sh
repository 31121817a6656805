#!/usr/bin/env bash
# The Python bindings on a GPU machine, offline: builds the extension with plain CMake against
# the installed nanobind and jax (no pip, no network), runs the Python tests with the GPU tests
# enabled (JAX's CUDA handler, PyTorch and CuPy arrays, ragdot.torch.grouped_mm against
# torch._grouped_mm), then the MoE step benchmark (bench/python_moe_step.py) and the unmodified
# JAX training step with and without ragdot.jax.enable() (bench/jax_enable_step.py). Writes
# python_tests.txt, python_bench.{json,md} and jax_enable.{json,md} to $OUT.
#
#   OUT=/some/dir scripts/gpu_python.sh [--quick] [--no-bench]
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/gpu_log.sh python_log.txt
quick="" bench=1
for a in "$@"; do
  case $a in
    --quick) quick="--quick" ;;
    --no-bench) bench=0 ;;
  esac
done
PY=${RAGDOT_PYTHON:-python3}
BUILD=${RAGDOT_PY_BUILD_DIR:-/tmp/ragdot-python-build}

for m in nanobind jax torch cupy pytest; do
  echo "$m: $("$PY" -c "import $m; print(getattr($m, '__version__', 'present'))" 2>&1 | tail -1)" >> "$LOG"
done
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
say "building the extension (plain CMake) in $BUILD"
if ! { cmake -S . -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DRAGDOT_ENABLE_CUDA=ON \
         -DRAGDOT_BUILD_PYTHON=ON -DRAGDOT_BUILD_TESTS=OFF -DRAGDOT_BUILD_TOOLS=OFF -DRAGDOT_BUILD_BENCH=OFF \
         -DPython_EXECUTABLE="$(command -v "$PY")" &&
       cmake --build "$BUILD" --target ragdot_python_package -j"${RAGDOT_BUILD_JOBS:-$(nproc)}"; } >> "$LOG" 2>&1; then
  say "build failed (see python_log.txt)"
  exit 1
fi
export PYTHONPATH=$BUILD/python_package${PYTHONPATH:+:$PYTHONPATH}
"$PY" -c "import ragdot; print(ragdot.backends())" >> "$LOG" 2>&1

say "Python tests (GPU included)"
# With pytest-xdist the tests run in worker processes: a test that crashes its process is
# reported by name and the rest still run.
workers=()
"$PY" -c "import xdist" 2> /dev/null && workers=(-n 4)
RAGDOT_TEST_GPU=1 "$PY" -m pytest -q -p no:cacheprovider -o pythonpath=tests/python "${workers[@]}" tests/python \
  > "$OUT/python_tests.txt" 2>&1
echo "pytest exit $? : $(tail -1 "$OUT/python_tests.txt")" | tee -a "$LOG" >&2

if [ $bench = 1 ]; then
  say "MoE step benchmark: ragdot.jax vs jax.lax.ragged_dot, ragdot.torch vs torch._grouped_mm"
  timeout 500 "$PY" bench/python_moe_step.py --json "$OUT/python_bench.json" --md "$OUT/python_bench.md" $quick \
    2>> "$LOG" | tee -a "$LOG" >&2
  say "JAX MoE training step, JAX's lowering against ragdot.jax.enable(): time and peak memory"
  timeout 500 "$PY" bench/jax_enable_step.py --json "$OUT/jax_enable.json" --md "$OUT/jax_enable.md" $quick \
    2>> "$LOG" | tee -a "$LOG" >&2
fi
say "done"
