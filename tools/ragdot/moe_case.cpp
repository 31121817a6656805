#include "moe_case.hpp"

#include <algorithm>

namespace ragdot::cli {

std::int64_t MoeGemmCase::rows() const {
  std::int64_t r = 0;
  for (auto s : group_sizes) r += s;
  return r;
}

std::int64_t MoeGemmCase::active_groups() const {
  return std::int64_t(std::count_if(group_sizes.begin(), group_sizes.end(), [](std::int64_t s) { return s > 0; }));
}

std::int64_t MoeGemmCase::largest_group() const {
  return group_sizes.empty() ? 0 : *std::max_element(group_sizes.begin(), group_sizes.end());
}

std::int64_t MoeGemmCase::smallest_active_group() const {
  std::int64_t best = 0;
  for (auto s : group_sizes) {
    if (s > 0 && (best == 0 || s < best)) best = s;
  }
  return best;
}

double MoeGemmCase::useful_flops() const { return 2.0 * double(rows()) * double(k) * double(n); }

double MoeGemmCase::min_bytes(DType out_dtype) const {
  const double in = double(dtype_size(dtype)), out = double(dtype_size(out_dtype));
  return in * double(m) * double(k) + in * double(active_groups()) * double(k) * double(n) +
         out * double(m) * double(n);
}

std::string MoeGemmCase::title() const {
  std::string t = model;
  if (shrink > 1) t.append("/").append(std::to_string(shrink));
  return t + " " + gemm;
}

workloads::MoePreset shrunk_preset(const workloads::MoePreset& preset, std::int64_t shrink) {
  workloads::MoePreset p = preset;
  if (shrink > 1) {
    p.hidden = std::max<std::int64_t>(1, p.hidden / shrink);
    p.expert_ffn = std::max<std::int64_t>(1, p.expert_ffn / shrink);
  }
  return p;
}

std::vector<MoeGemmCase> layer_cases(const workloads::MoePreset& preset, std::int64_t tokens, double skew,
                                     std::uint64_t seed, DType dtype, std::int64_t shrink) {
  const workloads::MoePreset p = shrunk_preset(preset, shrink);
  // One routing decision per layer: the up and down GEMMs see the same group sizes.
  const auto sizes = workloads::route_group_sizes(tokens, p.top_k, p.experts, skew, seed);
  std::vector<MoeGemmCase> cases;
  for (const auto& g : workloads::layer_gemms(p, tokens)) {
    MoeGemmCase c;
    c.model = preset.name;
    c.gemm = g.name;
    c.tokens = tokens;
    c.skew = skew;
    c.shrink = std::max<std::int64_t>(shrink, 1);
    c.m = g.m;
    c.k = g.k;
    c.n = g.n;
    c.groups = g.groups;
    c.dtype = dtype;
    c.group_sizes = sizes;
    cases.push_back(std::move(c));
  }
  return cases;
}

double largest_weight_bytes(const workloads::MoePreset& preset, DType dtype) {
  double largest = 0;
  for (const auto& g : workloads::layer_gemms(preset, 1)) {
    largest = std::max(largest, double(g.groups) * double(g.k) * double(g.n) * double(dtype_size(dtype)));
  }
  return largest;
}

SizeDefaults default_sizes(const workloads::MoePreset& preset, DType dtype, MemorySpace space,
                           double host_memory_bytes, std::int64_t forced_shrink, double host_flop_rate) {
  SizeDefaults d;
  if (space == MemorySpace::kDevice) {
    d.shrink = forced_shrink > 0 ? forced_shrink : 1;
    d.tokens = 4096;
    return d;
  }
  constexpr std::int64_t kMinTokens = 16, kMaxTokens = 4096, kMaxShrink = 64;
  // What a two-core AMX machine reaches (1.5 TFLOP/s bf16, 0.4 f32 / f16) when nobody measured.
  if (!(host_flop_rate > 0)) host_flop_rate = dtype == DType::kBF16 ? 1.6e12 : 4e11;
  const double host_flop_budget = host_flop_rate * kHostSecondsPerGemm;
  auto flops_per_token = [&](std::int64_t shrink) {
    double most = 0;
    for (const auto& g : workloads::layer_gemms(shrunk_preset(preset, shrink), 1)) {
      most = std::max(most, 2.0 * double(g.m) * double(g.k) * double(g.n));
    }
    return most;
  };
  if (forced_shrink > 0) {
    d.shrink = forced_shrink;
  } else {
    // One GEMM's weights stay under a quarter of the memory left, so that the staging copy, the
    // outputs and the rest of the machine fit beside them.
    while (d.shrink < kMaxShrink &&
           largest_weight_bytes(shrunk_preset(preset, d.shrink), dtype) > 0.25 * host_memory_bytes) {
      d.shrink *= 2;
    }
    // A slow machine (scalar kernels, a busy host) gets smaller layers rather than a long wait.
    while (d.shrink < kMaxShrink && double(kMinTokens) * flops_per_token(d.shrink) > host_flop_budget) {
      d.shrink *= 2;
    }
  }
  const double per_token = flops_per_token(d.shrink);
  d.tokens = kMinTokens;
  while (d.tokens < kMaxTokens && double(d.tokens * 2) * per_token <= host_flop_budget) d.tokens *= 2;
  return d;
}

}  // namespace ragdot::cli
