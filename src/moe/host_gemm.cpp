#include "moe/host_gemm.hpp"

#include <algorithm>

namespace ragdot::moe {

namespace {
constexpr std::size_t kWorkspaceAlign = 64;
}

RaggedDotSpec grouped_spec(std::int64_t m, std::int64_t a, std::int64_t b, std::int64_t g, bool rhs_transposed,
                           GemmDTypes types) {
  RaggedDotSpec s;
  s.lhs = {types.operands, {m, a}};
  s.rhs = {types.operands, rhs_transposed ? std::vector<std::int64_t>{g, b, a} : std::vector<std::int64_t>{g, a, b}};
  s.group_sizes = {types.group_sizes, {g}};
  s.dims.dot = {{1}, {rhs_transposed ? 2 : 1}, {}, {}};
  s.dims.lhs_ragged = {0};
  s.dims.rhs_group = {0};
  return s;
}

RaggedDotSpec weight_gradient_spec(std::int64_t m, std::int64_t a, std::int64_t b, std::int64_t g, GemmDTypes types) {
  RaggedDotSpec s;
  s.lhs = {types.operands, {m, a}};
  s.rhs = {types.operands, {m, b}};
  s.group_sizes = {types.group_sizes, {g}};
  s.dims.dot = {{0}, {0}, {}, {}};
  s.dims.lhs_ragged = {0};
  s.dims.rhs_group = {};
  return s;
}

std::vector<RaggedDotSpec> expert_ffn_specs(std::int64_t rows, std::int64_t groups, std::int64_t hidden,
                                            std::int64_t ffn, GemmDTypes types) {
  return {
      grouped_spec(rows, hidden, 2 * ffn, groups, false, types),  // up = in * W_up
      grouped_spec(rows, ffn, hidden, groups, false, types),      // out = act * W_down
      grouped_spec(rows, hidden, ffn, groups, true, types),       // d_act = d_out * W_down^T
      grouped_spec(rows, 2 * ffn, hidden, groups, true, types),   // d_in = d_up * W_up^T
      weight_gradient_spec(rows, ffn, hidden, groups, types),     // d_W_down = act^T d_out per group
      weight_gradient_spec(rows, hidden, 2 * ffn, groups, types), // d_W_up = in^T d_up per group
  };
}

const char* expert_ffn_gemm_name(int gemm) {
  static const char* names[] = {"up", "down", "d_act", "d_in", "d_w_down", "d_w_up"};
  return gemm >= 0 && gemm < 6 ? names[gemm] : "?";
}

std::vector<RaggedDotSpec> router_specs(std::int64_t tokens, std::int64_t hidden, std::int64_t experts,
                                        GemmDTypes types) {
  return {grouped_spec(tokens, hidden, experts, 1, false, types),  // logits = x Wr: [T,H] x [1,H,E]
          grouped_spec(tokens, experts, hidden, 1, true, types),   // d_x = d_logits Wr^T: [T,E] x [1,H,E]^T
          weight_gradient_spec(tokens, hidden, experts, 1, types)};  // d_Wr = x^T d_logits
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
  return run_plan(plan, lhs, rhs, gs, out, ws, nullptr, report);
}

Status run_plan(const Plan& plan, const void* lhs, const void* rhs, const void* gs, void* out, MutableBuffer ws,
                void* stream, ExecuteReport* report, const GatheredLhs* gathered, const ScatteredOut* scattered,
                std::size_t out_bytes) {
  const RaggedDotSpec& s = plan.op().spec();
  const MemorySpace space = plan.memory_space();
  ExecuteArgs a;
  a.lhs = {lhs, gathered ? gathered->table_bytes : s.lhs.num_bytes(), space};
  if (gathered) a.lhs_rows = {gathered->rows, std::size_t(s.lhs.shape[0]) * 4, space};
  a.rhs = {rhs, s.rhs.num_bytes(), space};
  a.group_sizes = {gs, s.group_sizes.num_bytes(), space};
  a.out = {out, scattered ? scattered->table_bytes : out_bytes ? out_bytes : plan.op().out().num_bytes(), space};
  if (scattered) {
    a.out_rows = {scattered->rows, std::size_t(s.lhs.shape[0]) * 4, space};
    a.row_scales = {scattered->scales, std::size_t(s.lhs.shape[0]) * 4, space};
  }
  a.workspace = ws;
  a.stream = stream;
  a.report = report;
  return plan.execute(a);
}

}  // namespace ragdot::moe
