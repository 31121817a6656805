#include "planner/padded_capacity.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/element_limit.hpp"

namespace ragdot::planner {

std::int64_t capacity_for_factor(double factor, std::int64_t rows, std::int64_t groups) {
  const double cap = std::ceil(factor * double(rows) / double(std::max<std::int64_t>(groups, 1)));
  // a group never holds more than all the rows; comparing first keeps a huge (or NaN) value from
  // an undefined conversion to int64
  if (!(cap < double(rows))) return rows;
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
    if (!(std::isfinite(*c.factor) && *c.factor > 0.0)) {
      return invalid_argument("padded_capacity_factor must be a finite number > 0");
    }
    c.max_capacity = capacity_for_factor(*c.factor, rows, p.computed_groups);
    if (o.padded_max_group_rows) c.max_capacity = std::min(c.max_capacity, *o.padded_max_group_rows);
  } else {
    c.max_capacity = o.padded_max_group_rows ? *o.padded_max_group_rows : rows;
  }
  if (c.max_capacity < 0) return invalid_argument("padded_max_group_rows must be >= 0");
  c.max_capacity = std::min(c.max_capacity, rows);
  // the dense buffers, [groups, capacity, width], within the element limit of any tensor, so that
  // their byte counts cannot overflow
  const std::int64_t groups = std::max<std::int64_t>(p.computed_groups, 1), cap = c.max_capacity;
  const std::int64_t width = std::max(p.mode == RaggedMode::kNonContracting ? p.k : p.m, p.n);
  if (!core::elements_fit({groups, cap, width})) {
    return invalid_argument("the padded baseline's buffers of " + std::to_string(groups) + " groups x " +
                            std::to_string(cap) + " rows x " + std::to_string(width) + " have too many elements");
  }
  return c;
}

}  // namespace ragdot::planner
