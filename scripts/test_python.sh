#!/usr/bin/env bash
# Builds and installs the Python package into the virtual environment .venv (made when missing,
# kept between runs) and runs its tests: the NumPy API, ragdot.jax against jax.lax (values,
# dtypes, gradients, vmap, group offset) and, when PyTorch is installed, the PyTorch op. GPU
# tests skip themselves without a GPU. Called by scripts/test.sh; extra arguments go to pytest.
#
# Settings (environment): RAGDOT_PYTHON (the interpreter that makes .venv, default python3),
# RAGDOT_BUILD_JOBS (parallel build jobs, default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "test_python: $*" >&2; }

venv=.venv
if [ ! -x "$venv/bin/python" ]; then
  say "making $venv"
  "${RAGDOT_PYTHON:-python3}" -m venv "$venv"
fi
# Build requirements are installed here and the build runs without isolation: a second run needs
# no network, and the build sees the same jax whose FFI headers the extension is compiled against.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "scikit-build-core>=0.10" "nanobind>=2.0" "jax>=0.4.38" ml_dtypes numpy pytest matplotlib
say "building and installing the package"
CMAKE_BUILD_PARALLEL_LEVEL=${RAGDOT_BUILD_JOBS:-1} \
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps .
"$venv/bin/python" -m pytest -q tests/python "$@"
