// The cases `ragdot verify` runs on every backend: seeded random ops over the whole space of
// ragged_dot_general (batch dims, several m/k/n dims, permuted axes, group offsets), plus a grid
// of plain MoE forms for every mode, operand dtype and group-size pattern (empty groups, all rows
// in one group, sizes summing short of the extent, ...).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "verify/cases.hpp"

namespace ragdot::cli {

struct MatrixOptions {
  int random_cases = 200;
  bool pattern_grid = true;
  std::uint64_t seed = 1;
  int mode = 0;                // 1, 2, 3, or 0 for all
  std::optional<DType> dtype;  // unset: f32, bf16 and f16
  std::int64_t max_dim = 40;   // upper bound of the random cases' sizes
};

struct MatrixCase {
  verify::Case c;
  std::uint64_t data_seed = 0;  // seeds the operand values
  std::string kind;             // "random" or "pattern"
};

std::vector<MatrixCase> build_matrix(const MatrixOptions& options);

}  // namespace ragdot::cli
