// The padded baseline's plan-time rules, shared by its host and GPU backends: which ops it takes
// and the per-group capacity its workspace is sized for.
#pragma once

#include <cstdint>
#include <optional>

#include "core/problem.hpp"
#include "ragdot/plan.hpp"

namespace ragdot::planner {

struct PaddedCapacity {
  std::optional<double> factor;  // set: capacity = ceil(factor * rows / groups), rows past it dropped
  std::int64_t max_capacity = 0; // rows per group the workspace holds
};

// unsupported("why") for ops the baseline does not take (ragged batch, batch dims, relayouts, group
// sizes with rows), invalid_argument for bad options.
Result<PaddedCapacity> padded_capacity(const core::GroupGemmProblem& p, const PlanOptions& options);

// The capacity of a capacity factor: ceil(factor * rows / groups), at least 0.
std::int64_t capacity_for_factor(double factor, std::int64_t rows, std::int64_t groups);

// Rows of the ragged dimension (m in mode 1, k in mode 2).
inline std::int64_t padded_rows(const core::GroupGemmProblem& p) {
  return p.mode == RaggedMode::kNonContracting ? p.m : p.k;
}

}  // namespace ragdot::planner
