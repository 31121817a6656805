// The f32 ragged dots the MoE layer plans on host buffers (the expert FFN's and the router's),
// their specs, and one aligned workspace they all share, sized at plan time.
#pragma once

#include <cstdint>
#include <vector>

#include "ragdot/plan.hpp"
#include "ragdot/status.hpp"

namespace ragdot::moe {

// lhs [m, a] against per-group rhs [g, a, b] (mode 1), or rhs [g, b, a] contracting its last dim.
RaggedDotSpec grouped_spec(std::int64_t m, std::int64_t a, std::int64_t b, std::int64_t g, bool rhs_transposed);
// [g, a, b] = per group lhs[rows, a]^T rhs[rows, b] (mode 2, ragged along the rows).
RaggedDotSpec weight_gradient_spec(std::int64_t m, std::int64_t a, std::int64_t b, std::int64_t g);

// Workspace for every plan of a layer; plans run one after another, so the largest one sizes it.
class HostWorkspace {
 public:
  void reserve(std::size_t bytes);
  MutableBuffer buffer();  // 64-byte aligned, as the backends want it

 private:
  std::vector<unsigned char> storage_;
  std::size_t bytes_ = 0;
};

// Plans `spec` and grows `ws` to hold its workspace.
Result<Plan> plan_host(const RaggedDotSpec& spec, const PlanOptions& options, HostWorkspace& ws);
// Runs a plan_host plan on host f32 buffers, group sizes int64.
Status run_host(const Plan& plan, const float* lhs, const float* rhs, const std::int64_t* gs, float* out,
                MutableBuffer ws, ExecuteReport* report = nullptr);

}  // namespace ragdot::moe
