// `ragdot layer --backend cuda`: one MoE layer of a preset on the GPU (ragdot::moe::DeviceMoeLayer,
// bf16), timed with CUDA events beside the GPU padded baselines, with the share of the
// permutation and the combine and their memory time against one copy of the routed activations.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ragdot/moe.hpp"
#include "ragdot/moe_device.hpp"
#include "ragdot/workloads.hpp"

namespace ragdot::cli {

struct GpuLayerRequest {
  workloads::MoePreset preset;
  std::int64_t tokens = 4096;
  std::int64_t shrink = 1;
  moe::GatedActivation activation = moe::GatedActivation::kSwiGLU;  // the preset's is SwiGLU
  double capacity_factor = 1.25;
  std::uint64_t seed = 1;
  int reps = 10;
  int warmup = 2;
  bool baselines = true;
  // DeviceMoeOptions::gather_in_up_gemm for ragdot's own path (--fused-gather: kOn,
  // --no-fused-gather: kOff)
  moe::Fusion gather = moe::Fusion::kAuto;
  // DeviceMoeOptions::gather_in_down_data_grad for ragdot's own path (--fused-dy-gather: kOn,
  // --no-fused-dy-gather: kOff)
  moe::Fusion gather_dy = moe::Fusion::kAuto;
  // DeviceMoeOptions::gather_in_up_weight_grad (--fused-wgrad-gather: kOn, --no-fused-wgrad-gather: kOff)
  moe::Fusion gather_wgrad = moe::Fusion::kAuto;
  bool fused_swiglu = false;  // DeviceMoeOptions::swiglu_in_up_gemm for ragdot's own path
  bool fused_combine = false;  // DeviceMoeOptions::combine_in_down_gemm for ragdot's own path
  std::optional<std::string> json_path;
};

// Prints the report (and writes the JSON); returns the exit status.
int run_gpu_layer(const GpuLayerRequest& request);

// The seed of one parameter or input of the layer for fill_device_uniform (bench/moe_layer_peers.py
// derives the same): x 1, router 2, router bias 3, w_up 4, w_down 5, shared_up 6, shared_down 7, dy 8.
std::uint32_t layer_tensor_seed(std::uint64_t seed, int tensor);

}  // namespace ragdot::cli
