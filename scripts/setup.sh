#!/usr/bin/env bash
# Sets up a Debian machine for ragdot and builds it: installs the build dependencies with apt-get
# when some are missing (as root, or through sudo), puts the CUDA toolkit of /usr/local/cuda on
# PATH when there is one (the GPU backends are then built too), configures with CMake and Ninja,
# and builds everything into build/. Safe to run again: it only rebuilds what changed.
#
#   scripts/setup.sh && build/tools/ragdot run
#
# Settings (environment): RAGDOT_BUILD_DIR (default build), RAGDOT_BUILD_TYPE (default Release),
# RAGDOT_BUILD_JOBS (default: Ninja's choice), RAGDOT_CMAKE_ARGS (more arguments for cmake).
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${RAGDOT_BUILD_DIR:-build}
build_type=${RAGDOT_BUILD_TYPE:-Release}
# What the build needs. The CPU peer benchmark (bench/cpu_peers) also wants libdnnl-dev and
# libopenblas-dev; it is skipped when they are missing.
packages=(cmake ninja-build g++ libgtest-dev)

say() { echo "setup: $*" >&2; }

missing_packages() {
  local p
  for p in "$@"; do
    if command -v dpkg-query > /dev/null; then
      dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q "install ok installed" || echo "$p"
    fi
  done
}

install_packages() {
  local missing
  missing=$(missing_packages "$@")
  [ -z "$missing" ] && return 0
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo > /dev/null; then
      say "missing packages: $missing; run as root or install sudo"
      exit 1
    fi
    sudo=(sudo)
  fi
  say "installing $missing"
  ${sudo[@]+"${sudo[@]}"} apt-get update
  # shellcheck disable=SC2086  # one word per package
  ${sudo[@]+"${sudo[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
}

install_packages "${packages[@]}"
for tool in cmake ninja g++; do
  command -v "$tool" > /dev/null || { say "$tool is not installed"; exit 1; }
done
if [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
  # The codegen tests disassemble the Hopper kernels (HGMMA must be in their machine code) with
  # cuobjdump and nvdisasm, which the toolkit may lack; PyPI has them.
  if ! command -v cuobjdump > /dev/null && [ -z "${RAGDOT_CUOBJDUMP:-}" ] &&
    ! python3 -c 'import importlib.util as u, os, sys; s = u.find_spec("nvidia"); sys.exit(0 if s and any(os.path.exists(p + "/cu13/bin/nvdisasm") for p in s.submodule_search_locations) else 1)' 2> /dev/null; then
    say "installing cuobjdump and nvdisasm (pip: nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)"
    python3 -m pip install --quiet nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm ||
      python3 -m pip install --quiet --break-system-packages nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm ||
      say "could not install cuobjdump; the Hopper machine-code test will fail"
  fi
fi

# shellcheck disable=SC2086  # RAGDOT_CMAKE_ARGS holds several arguments
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" ${RAGDOT_CMAKE_ARGS:-}
cmake --build "$build_dir" ${RAGDOT_BUILD_JOBS:+--parallel "$RAGDOT_BUILD_JOBS"}
say "built $build_dir/tools/ragdot"
