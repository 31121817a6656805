#!/usr/bin/env bash
# Builds the GPU test and benchmark programs and the ragdot program here (where GoogleTest is
# installed) into .devbin/, for a GPU machine that has the CUDA driver but perhaps no build
# dependencies (scripts/gpu_check.sh and scripts/gpu_layer.sh use them).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DRAGDOT_ENABLE_CUDA=ON -DRAGDOT_BUILD_TOOLS=ON \
  -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
cmake --build build-gpu --target test_cuda_backend test_cublas_backend test_moe_device test_moe_layer_device \
  test_cuda_codegen test_cublas_host test_cpu_backends test_ep_nccl test_moe_expert_parallel gpu_bench ep_bench ragdot_cli -j"$(nproc)"
rm -rf .devbin && mkdir -p .devbin
cp build-gpu/tests/cpp/test_cuda_backend build-gpu/tests/cpp/test_cublas_backend build-gpu/tests/cpp/test_moe_device \
  build-gpu/tests/cpp/test_moe_layer_device build-gpu/tests/cpp/test_cuda_codegen build-gpu/tools/ragdot \
  build-gpu/tests/cpp/test_cublas_host build-gpu/tests/cpp/test_cpu_backends build-gpu/tests/cpp/test_ep_nccl build-gpu/tests/cpp/test_moe_expert_parallel \
  build-gpu/bench/gpu_bench build-gpu/bench/ep_bench .devbin/
git rev-parse --short HEAD > .devbin/commit 2>/dev/null || echo unknown > .devbin/commit
git diff --quiet HEAD 2>/dev/null || echo "+dirty" >> .devbin/commit
ls -la .devbin
