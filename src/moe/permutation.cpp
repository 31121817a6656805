#include "moe/permutation.hpp"

#include <cstring>

namespace ragdot::moe {

void sort_by_expert(const std::int32_t* experts, std::int64_t pairs, std::int64_t num_experts, Permutation& p) {
  p.group_sizes.assign(std::size_t(num_experts), 0);
  p.row_of.resize(std::size_t(pairs));
  p.pair_of.resize(std::size_t(pairs));
  for (std::int64_t i = 0; i < pairs; ++i) ++p.group_sizes[std::size_t(experts[i])];
  p.next.assign(std::size_t(num_experts), 0);
  for (std::int64_t e = 1; e < num_experts; ++e) p.next[e] = p.next[e - 1] + p.group_sizes[e - 1];
  for (std::int64_t i = 0; i < pairs; ++i) {
    const std::int64_t r = p.next[std::size_t(experts[i])]++;
    p.row_of[i] = r;
    p.pair_of[r] = i;
  }
}

void gather_rows(const Permutation& p, const float* x, const float* scale, std::int64_t k, std::int64_t h,
                 float* rows) {
  const std::int64_t n = std::int64_t(p.pair_of.size());
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < n; ++r) {
    const std::int64_t t = p.pair_of[r] / k;
    const float s = scale ? scale[t] : 1.0f;
    const float* src = x + t * h;
    float* dst = rows + r * h;
    if (s == 1.0f) {
      std::memcpy(dst, src, std::size_t(h) * sizeof(float));
    } else {
      for (std::int64_t c = 0; c < h; ++c) dst[c] = s * src[c];
    }
  }
}

void combine_rows(const Permutation& p, const float* rows, const float* weights, std::int64_t tokens, std::int64_t k,
                  std::int64_t h, bool accumulate, float* y) {
#pragma omp parallel for schedule(static)
  for (std::int64_t t = 0; t < tokens; ++t) {
    float* out = y + t * h;
    if (!accumulate) std::memset(out, 0, std::size_t(h) * sizeof(float));
    for (std::int64_t j = 0; j < k; ++j) {
      const float w = weights[t * k + j];
      const float* src = rows + p.row_of[t * k + j] * h;
      for (std::int64_t c = 0; c < h; ++c) out[c] += w * src[c];
    }
  }
}

}  // namespace ragdot::moe
