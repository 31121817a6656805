// Plans cached per static signature: shapes, dtypes, dimension numbers, group offset, backend and
// device. Making a plan can compile a GPU kernel; every later call with the same signature (each
// step of a training loop, each XLA execution) only looks it up.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ragdot/ragdot.hpp"

namespace ragdot::python {

struct PlanTarget {
  std::optional<MemorySpace> memory_space;  // restricts automatic choice (the FFI handlers)
  std::string backend;                      // empty: automatic
  int device = 0;
  std::optional<std::int64_t> lhs_gather_rows;  // PlanOptions::lhs_gather_rows (a table of rows)
};

// The cached plan for `spec` on `target`, made on first use. Thread-safe: XLA may run handlers
// from several threads.
Result<Plan> cached_plan(const RaggedDotSpec& spec, const PlanTarget& target);

std::size_t plan_cache_size();
void clear_plan_cache();

}  // namespace ragdot::python
