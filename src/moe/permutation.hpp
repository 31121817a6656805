// Tokens to expert-sorted rows and back: a stable counting sort of the (token, slot) pairs by
// expert, the gather of their rows, and the weighted combine of the expert outputs.
#pragma once

#include <cstdint>
#include <vector>

namespace ragdot::moe {

struct Permutation {
  std::vector<std::int64_t> group_sizes;  // [E]
  std::vector<std::int64_t> row_of;       // [T*k]: sorted row of pair t*k + j
  std::vector<std::int64_t> pair_of;      // [T*k]: pair of sorted row r
  std::vector<std::int64_t> next;         // [E]: the sort's write positions (kept to reuse)
};

// experts [T*k] -> the sort (stable: pairs of one expert keep token order). Allocates only when
// `p` is smaller than the sizes given (the first call).
void sort_by_expert(const std::int32_t* experts, std::int64_t pairs, std::int64_t num_experts, Permutation& p);

// rows[r] = scale[t] * x[t] for sorted row r of pair (t, j); x [T, H], rows [T*k, H].
void gather_rows(const Permutation& p, const float* x, const float* scale, std::int64_t k, std::int64_t h, float* rows);

// y[t] (+)= sum_j weight[t*k+j] * rows[row_of[t*k+j]], accumulated in f32 in slot order.
void combine_rows(const Permutation& p, const float* rows, const float* weights, std::int64_t tokens, std::int64_t k,
                  std::int64_t h, bool accumulate, float* y);

}  // namespace ragdot::moe
