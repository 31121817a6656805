// The backend interface: a backend turns a canonical problem into a BackendPlan, or says why not.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/problem.hpp"
#include "ragdot/plan.hpp"

namespace ragdot::detail {

// What a backend keeps between executes. Immutable after planning.
class BackendPlan {
 public:
  virtual ~BackendPlan() = default;
  // Buffers have passed the generic checks of Plan::execute (non-null, large enough, aligned,
  // right memory space); the backend checks what only it knows (group sizes on host paths).
  virtual Status execute(const ExecuteArgs& args) const = 0;

  std::string variant;
  std::size_t workspace_bytes = 0;
  bool graph_safe = false;
  bool needs_host_sync = false;
  MemorySpace memory_space = MemorySpace::kHost;
  std::size_t operand_alignment = 0;  // bytes; 0 = the element size
};

}  // namespace ragdot::detail

namespace ragdot::planner {

struct PlanRequest {
  const RaggedDot& op;
  const core::GroupGemmProblem& problem;
  const PlanOptions& options;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual MemorySpace memory_space() const = 0;
  // Whether automatic selection may pick it (the padded baseline only runs when named).
  virtual bool automatic() const { return true; }
  // ok, or unavailable("why") when the hardware or library is missing.
  virtual Status available() const = 0;
  // One line: what it runs on ("AVX-512 + AMX, 2 threads").
  virtual std::string describe() const = 0;
  // Whether it reads lhs rows through an index (PlanOptions::lhs_gather_rows); those that do not
  // are not offered such plans.
  virtual bool gathers_lhs_rows() const { return false; }
  // Whether it can apply the SwiGLU epilogue (PlanOptions::swiglu_epilogue); those that cannot are
  // not offered such plans.
  virtual bool fuses_swiglu() const { return false; }
  // Whether it can add its output rows into a table through an index (PlanOptions::
  // out_scatter_rows); those that cannot are not offered such plans.
  virtual bool scatters_out_rows() const { return false; }
  // unsupported("why") when it does not take this op.
  virtual Result<std::unique_ptr<detail::BackendPlan>> plan(const PlanRequest& request) const = 0;
};

// The backends built into this library, in the order automatic selection tries them.
const std::vector<const Backend*>& registry();

}  // namespace ragdot::planner
