// One ragged dot of an MoE layer, as `ragdot run` and `ragdot bench` measure it: a model preset's
// up or down GEMM at a token count and routing skew, with its group sizes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ragdot/dtype.hpp"
#include "ragdot/tensor.hpp"
#include "ragdot/workloads.hpp"

namespace ragdot::cli {

struct MoeGemmCase {
  std::string model;  // preset name
  std::string gemm;   // "up" or "down"
  std::int64_t tokens = 0;
  double skew = 0.0;
  std::int64_t shrink = 1;  // hidden and expert ffn were divided by this
  std::int64_t m = 0, k = 0, n = 0, groups = 0;
  DType dtype = DType::kBF16;
  std::vector<std::int64_t> group_sizes;

  std::int64_t rows() const;           // sum of the group sizes
  std::int64_t active_groups() const;  // groups with at least one row
  std::int64_t largest_group() const;
  std::int64_t smallest_active_group() const;
  // 2 * rows * k * n: the useful work, whatever a backend does with padding.
  double useful_flops() const;
  // Bytes a perfect implementation moves: lhs, the weights of the experts that have rows, out.
  double min_bytes(DType out_dtype) const;
  // "mixtral-8x7b up" plus " /2" when shrunk.
  std::string title() const;
};

// The layer's up and down GEMMs; group sizes from the seeded router.
std::vector<MoeGemmCase> layer_cases(const workloads::MoePreset& preset, std::int64_t tokens, double skew,
                                     std::uint64_t seed, DType dtype, std::int64_t shrink);

// The preset with hidden and expert ffn divided by `shrink` (at least 1 each).
workloads::MoePreset shrunk_preset(const workloads::MoePreset& preset, std::int64_t shrink);

// Bytes of the largest weight tensor [experts, k, n] of the layer.
double largest_weight_bytes(const workloads::MoePreset& preset, DType dtype);

// Defaults that keep a run short where it runs. On a GPU: 4096 tokens (a prefill batch) at full
// size. On the host: the model's real dimensions unless its weights would crowd host memory or
// even the smallest batch would take long, and as many tokens (16 to 4096, powers of two) as keep
// each GEMM near kHostSecondsPerGemm at `host_flop_rate` (FLOP/s, measured; 0 = unknown, then the
// rate of a two-core AMX machine is assumed).
inline constexpr double kHostSecondsPerGemm = 0.1;
struct SizeDefaults {
  std::int64_t shrink = 1;
  std::int64_t tokens = 4096;
};
SizeDefaults default_sizes(const workloads::MoePreset& preset, DType dtype, MemorySpace space,
                           double host_memory_bytes, std::int64_t forced_shrink, double host_flop_rate = 0.0);

}  // namespace ragdot::cli
