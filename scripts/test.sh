#!/usr/bin/env bash
# Builds ragdot when needed (scripts/setup.sh) and runs the CPU tests: every test labelled "cpu",
# the library's, the kernel code generation's (when the CUDA toolkit is there) and the command
# line's; then the Python package's (scripts/test_python.sh: built into .venv, pytest). The GPU
# tests (label "gpu") run on a GPU machine through scripts/gpu_check.sh. Before the Python tests,
# scripts/test_sanitized.sh runs the CPU tests under ASan and UBSan and fuzzes for a bounded time,
# with clang in build-asan/ and build-fuzz/.
#
#   scripts/test.sh                          # all CPU tests
#   scripts/test.sh -R Cli                   # more arguments go to ctest
#   RAGDOT_SKIP_PYTHON=1 scripts/test.sh     # the C++ tests only
#   RAGDOT_SKIP_SANITIZED=1 scripts/test.sh  # without the sanitized tests and the fuzzing
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ctest --test-dir "${RAGDOT_BUILD_DIR:-build}" -L cpu --output-on-failure "$@"
if [ "${RAGDOT_SKIP_SANITIZED:-0}" != 1 ]; then
  scripts/test_sanitized.sh
fi
if [ "${RAGDOT_SKIP_PYTHON:-0}" != 1 ]; then
  scripts/test_python.sh
fi
