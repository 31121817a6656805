#include "planner/padded_capacity.hpp"

#include <algorithm>
#include <cmath>

namespace ragdot::planner {

std::int64_t capacity_for_factor(double factor, std::int64_t rows, std::int64_t groups) {
  const double cap = std::ceil(factor * double(rows) / double(std::max<std::int64_t>(groups, 1)));
  return std::max<std::int64_t>(std::int64_t(cap), 0);
}

Result<PaddedCapacity> padded_capacity(const core::GroupGemmProblem& p, const PlanOptions& o) {
  if (p.mode == RaggedMode::kBatch) return unsupported("padding has no meaning in ragged batch mode");
  if (!p.outer.empty() || !p.reduce.empty() || p.needs_relayout() || p.gs_elements != p.num_groups) {
    return unsupported("the padded baseline takes plain [m,k] x [g,k,n] (mode 1) and [m,k] x [m,n] (mode 2) ops");
  }
  const std::int64_t rows = padded_rows(p);
  PaddedCapacity c;
  c.factor = o.padded_capacity_factor;
  if (c.factor) {
    if (!(*c.factor > 0.0)) return invalid_argument("padded_capacity_factor must be > 0");
    c.max_capacity = capacity_for_factor(*c.factor, rows, p.computed_groups);
    if (o.padded_max_group_rows) c.max_capacity = std::min(c.max_capacity, *o.padded_max_group_rows);
  } else {
    c.max_capacity = o.padded_max_group_rows ? *o.padded_max_group_rows : rows;
  }
  if (c.max_capacity < 0) return invalid_argument("padded_max_group_rows must be >= 0");
  c.max_capacity = std::min(c.max_capacity, rows);
  return c;
}

}  // namespace ragdot::planner
