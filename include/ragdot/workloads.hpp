// MoE model presets and the seeded group-size generator shared by the CLI, benchmarks and tests.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ragdot/status.hpp"

namespace ragdot::workloads {

enum class RouterKind : std::uint8_t {
  kSoftmaxTopK,             // Mixtral: top-k of logits, softmax over the k
  kSoftmaxTopKRenormalized, // Qwen3: softmax over all, top-k, renormalized
  kDeepSeekV3,              // sigmoid + selection bias, renormalized, scaled
  kLlama4,                  // top-1, sigmoid scales the input, combine weight 1
};

struct MoePreset {
  std::string name;
  std::int64_t hidden = 0;      // H
  std::int64_t expert_ffn = 0;  // F (per expert)
  std::int64_t experts = 0;     // E
  std::int64_t top_k = 0;
  std::int64_t shared_experts = 0;
  RouterKind router = RouterKind::kSoftmaxTopK;
};

const std::vector<MoePreset>& presets();
Result<MoePreset> find_preset(std::string_view name);

// Routes `tokens` tokens to `top_k` distinct experts each and returns the tokens per expert.
// skew = 0: uniform router (Gumbel noise over equal logits). skew = s > 0: logits -s*log(rank)
// plus Gumbel noise (Zipf-like). Deterministic in `seed` on every platform (splitmix64 based).
std::vector<std::int64_t> route_group_sizes(std::int64_t tokens, std::int64_t top_k,
                                            std::int64_t experts, double skew, std::uint64_t seed);

// The two ragged dots of one MoE layer: up (gate and up fused) and down.
struct LayerGemm {
  std::string name;  // "up" or "down"
  std::int64_t m = 0, k = 0, n = 0, groups = 0;
};
std::vector<LayerGemm> layer_gemms(const MoePreset& preset, std::int64_t tokens);

// A small deterministic PRNG for test and benchmark data (not for cryptography).
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  double uniform();           // [0, 1)
  double uniform_open();      // (0, 1)
  double normal();            // standard normal (Box-Muller)
 private:
  std::uint64_t state_;
};

}  // namespace ragdot::workloads
