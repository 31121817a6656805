#include "ragdot/workloads.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ragdot::workloads {

const std::vector<MoePreset>& presets() {
  static const std::vector<MoePreset> p = {
      {"mixtral-8x7b", 4096, 14336, 8, 2, 0, RouterKind::kSoftmaxTopK},
      {"deepseek-v3", 7168, 2048, 256, 8, 1, RouterKind::kDeepSeekV3},
      {"llama4-scout", 5120, 8192, 16, 1, 1, RouterKind::kLlama4},
      {"qwen3-30b-a3b", 2048, 768, 128, 8, 0, RouterKind::kSoftmaxTopKRenormalized},
  };
  return p;
}

Result<MoePreset> find_preset(std::string_view name) {
  std::string names;
  for (const auto& p : presets()) {
    if (p.name == name) return p;
    // accept the short family name too ("mixtral", "qwen3")
    if (p.name.rfind(std::string(name) + "-", 0) == 0 && name.size() >= 4) return p;
    names += " " + p.name;
  }
  return invalid_argument("unknown model preset '" + std::string(name) + "' (known:" + names + ")");
}

std::uint64_t SplitMix64::next() {
  std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double SplitMix64::uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }

double SplitMix64::uniform_open() { return (double(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

double SplitMix64::normal() {
  const double u1 = uniform_open(), u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

std::vector<std::int64_t> route_group_sizes(std::int64_t tokens, std::int64_t top_k, std::int64_t experts,
                                            double skew, std::uint64_t seed) {
  std::vector<std::int64_t> sizes(std::size_t(std::max<std::int64_t>(experts, 0)), 0);
  if (experts <= 0 || tokens <= 0 || top_k <= 0) return sizes;
  const std::int64_t k = std::min(top_k, experts);
  SplitMix64 rng(seed);
  std::vector<double> logits(static_cast<std::size_t>(experts));
  std::vector<std::int64_t> order(static_cast<std::size_t>(experts));
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t e = 0; e < experts; ++e) {
      const double base = skew > 0 ? -skew * std::log(double(e + 1)) : 0.0;
      const double gumbel = -std::log(-std::log(rng.uniform_open()));
      logits[std::size_t(e)] = base + gumbel;
    }
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](std::int64_t a, std::int64_t b) {
      return logits[std::size_t(a)] > logits[std::size_t(b)] || (logits[std::size_t(a)] == logits[std::size_t(b)] && a < b);
    });
    for (std::int64_t i = 0; i < k; ++i) ++sizes[std::size_t(order[std::size_t(i)])];
  }
  return sizes;
}

std::vector<LayerGemm> layer_gemms(const MoePreset& p, std::int64_t tokens) {
  const std::int64_t m = tokens * p.top_k;
  return {
      {"up", m, p.hidden, 2 * p.expert_ffn, p.experts},
      {"down", m, p.expert_ffn, p.hidden, p.experts},
  };
}

}  // namespace ragdot::workloads
