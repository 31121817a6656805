#include "moe/host_gemm.hpp"

#include <algorithm>

namespace ragdot::moe {

namespace {
constexpr std::size_t kWorkspaceAlign = 64;
}

RaggedDotSpec grouped_spec(std::int64_t m, std::int64_t a, std::int64_t b, std::int64_t g, bool rhs_transposed) {
  RaggedDotSpec s;
  s.lhs = {DType::kF32, {m, a}};
  s.rhs = {DType::kF32, rhs_transposed ? std::vector<std::int64_t>{g, b, a} : std::vector<std::int64_t>{g, a, b}};
  s.group_sizes = {DType::kI64, {g}};
  s.dims.dot = {{1}, {rhs_transposed ? 2 : 1}, {}, {}};
  s.dims.lhs_ragged = {0};
  s.dims.rhs_group = {0};
  return s;
}

RaggedDotSpec weight_gradient_spec(std::int64_t m, std::int64_t a, std::int64_t b, std::int64_t g) {
  RaggedDotSpec s;
  s.lhs = {DType::kF32, {m, a}};
  s.rhs = {DType::kF32, {m, b}};
  s.group_sizes = {DType::kI64, {g}};
  s.dims.dot = {{0}, {0}, {}, {}};
  s.dims.lhs_ragged = {0};
  s.dims.rhs_group = {};
  return s;
}

void HostWorkspace::reserve(std::size_t bytes) {
  if (bytes <= bytes_) return;
  bytes_ = bytes;
  storage_.resize(bytes_ + kWorkspaceAlign);  // room to align the start
}

MutableBuffer HostWorkspace::buffer() {
  const auto base = reinterpret_cast<std::uintptr_t>(storage_.data());
  return {storage_.data() + (kWorkspaceAlign - base % kWorkspaceAlign) % kWorkspaceAlign, bytes_, MemorySpace::kHost};
}

Result<Plan> plan_host(const RaggedDotSpec& spec, const PlanOptions& options, HostWorkspace& ws) {
  RAGDOT_ASSIGN_OR_RETURN(RaggedDot op, RaggedDot::create(spec));
  RAGDOT_ASSIGN_OR_RETURN(Plan plan, make_plan(op, options));
  ws.reserve(plan.workspace_bytes());
  return plan;
}

Status run_host(const Plan& plan, const float* lhs, const float* rhs, const std::int64_t* gs, float* out,
                MutableBuffer ws, ExecuteReport* report) {
  const RaggedDotSpec& s = plan.op().spec();
  ExecuteArgs a;
  a.lhs = {lhs, s.lhs.num_bytes(), MemorySpace::kHost};
  a.rhs = {rhs, s.rhs.num_bytes(), MemorySpace::kHost};
  a.group_sizes = {gs, s.group_sizes.num_bytes(), MemorySpace::kHost};
  a.out = {out, plan.op().out().num_bytes(), MemorySpace::kHost};
  a.workspace = ws;
  a.report = report;
  return plan.execute(a);
}

}  // namespace ragdot::moe
