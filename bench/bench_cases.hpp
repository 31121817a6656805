// The benchmark's cases: the WORKLOADS.md presets' expert GEMMs, routed with the seeded router
// (workloads::route_group_sizes, seed 42). bench/gpu_bench times them on a GPU; bench/tile_model
// models how the Hopper kernel's tiles fill the SMs on the same group sizes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ragdot::bench {

struct BenchCase {
  std::string name;
  std::string preset;
  std::int64_t tokens;
  std::string gemm;  // up / down
  int mode;          // 1 forward, 2 weight gradient
  double skew;
};

inline std::vector<BenchCase> bench_cases() {
  return {
      {"mixtral prefill up", "mixtral-8x7b", 4096, "up", 1, 0.0},
      {"mixtral prefill up", "mixtral-8x7b", 4096, "up", 1, 1.2},
      {"mixtral prefill down", "mixtral-8x7b", 4096, "down", 1, 0.0},
      {"deepseek-v3 prefill up", "deepseek-v3", 4096, "up", 1, 0.0},
      {"deepseek-v3 prefill up", "deepseek-v3", 4096, "up", 1, 1.2},
      {"deepseek-v3 prefill down", "deepseek-v3", 4096, "down", 1, 0.0},
      {"llama4-scout prefill up", "llama4-scout", 8192, "up", 1, 0.0},
      {"qwen3 prefill up", "qwen3-30b-a3b", 8192, "up", 1, 0.0},
      {"qwen3 prefill up", "qwen3-30b-a3b", 8192, "up", 1, 1.2},
      {"deepseek-v3 decode up", "deepseek-v3", 128, "up", 1, 0.0},
      {"mixtral decode up", "mixtral-8x7b", 32, "up", 1, 0.0},
      {"mixtral wgrad up", "mixtral-8x7b", 4096, "up", 2, 0.0},
      {"deepseek-v3 wgrad up", "deepseek-v3", 4096, "up", 2, 0.0},
      {"deepseek-v3 wgrad up", "deepseek-v3", 4096, "up", 2, 1.2},
  };
}

// The seed of the router that gives every case its group sizes.
constexpr std::uint64_t kRouterSeed = 42;

}  // namespace ragdot::bench
