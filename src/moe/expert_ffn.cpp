#include "moe/expert_ffn.hpp"

#include <algorithm>
#include <cmath>

namespace ragdot::moe {

namespace {

constexpr std::size_t kWorkspaceAlign = 64;

enum PlanIndex { kUp, kDown, kDataGradAct, kDataGradIn, kWeightGradDown, kWeightGradUp };

// lhs [M, a] against per-group rhs [G, a, b] (mode 1), or with rhs [G, b, a] contracting its last dim.
RaggedDotSpec mode1(std::int64_t m, std::int64_t a, std::int64_t b, std::int64_t g, bool rhs_transposed) {
  RaggedDotSpec s;
  s.lhs = {DType::kF32, {m, a}};
  s.rhs = {DType::kF32, rhs_transposed ? std::vector<std::int64_t>{g, b, a} : std::vector<std::int64_t>{g, a, b}};
  s.group_sizes = {DType::kI64, {g}};
  s.dims.dot = {{1}, {rhs_transposed ? 2 : 1}, {}, {}};
  s.dims.lhs_ragged = {0};
  s.dims.rhs_group = {0};
  return s;
}

// [G, a, b] = per group lhs[rows, a]^T rhs[rows, b] (mode 2, ragged along the rows).
RaggedDotSpec mode2(std::int64_t m, std::int64_t a, std::int64_t b, std::int64_t g) {
  RaggedDotSpec s;
  s.lhs = {DType::kF32, {m, a}};
  s.rhs = {DType::kF32, {m, b}};
  s.group_sizes = {DType::kI64, {g}};
  s.dims.dot = {{0}, {0}, {}, {}};
  s.dims.lhs_ragged = {0};
  s.dims.rhs_group = {};
  return s;
}

float sigmoid(float z) { return 1.0f / (1.0f + std::exp(-z)); }

}  // namespace

Result<ExpertFfn> ExpertFfn::create(std::int64_t rows, std::int64_t groups, std::int64_t hidden, std::int64_t ffn,
                                    const PlanOptions& options) {
  if (rows < 0 || groups < 1 || hidden < 1 || ffn < 1)
    return invalid_argument("expert FFN: rows >= 0, groups, hidden and ffn >= 1 (got rows " + std::to_string(rows) +
                            ", groups " + std::to_string(groups) + ", hidden " + std::to_string(hidden) + ", ffn " +
                            std::to_string(ffn) + ")");
  ExpertFfn f;
  f.rows_ = rows, f.groups_ = groups, f.hidden_ = hidden, f.ffn_ = ffn;
  const std::vector<RaggedDotSpec> specs = {
      mode1(rows, hidden, 2 * ffn, groups, false),  // up = in * W_up
      mode1(rows, ffn, hidden, groups, false),      // out = act * W_down
      mode1(rows, hidden, ffn, groups, true),       // d_act = d_out * W_down^T
      mode1(rows, 2 * ffn, hidden, groups, true),   // d_in = d_up * W_up^T
      mode2(rows, ffn, hidden, groups),             // d_W_down = act^T d_out per group
      mode2(rows, hidden, 2 * ffn, groups),         // d_W_up = in^T d_up per group
  };
  std::size_t ws = 0;
  for (const RaggedDotSpec& spec : specs) {
    RAGDOT_ASSIGN_OR_RETURN(RaggedDot op, RaggedDot::create(spec));
    RAGDOT_ASSIGN_OR_RETURN(Plan plan, make_plan(op, options));
    ws = std::max(ws, plan.workspace_bytes());
    f.plans_.push_back(std::move(plan));
  }
  f.workspace_.resize(ws + kWorkspaceAlign);
  f.workspace_bytes_ = ws;
  return f;
}

Status ExpertFfn::run(const Plan& plan, const float* lhs, const float* rhs, const std::int64_t* gs, float* out,
                      ExecuteReport* report) {
  const RaggedDotSpec& s = plan.op().spec();
  ExecuteArgs a;
  a.lhs = {lhs, s.lhs.num_bytes(), MemorySpace::kHost};
  a.rhs = {rhs, s.rhs.num_bytes(), MemorySpace::kHost};
  a.group_sizes = {gs, std::size_t(groups_) * sizeof(std::int64_t), MemorySpace::kHost};
  a.out = {out, plan.op().out().num_bytes(), MemorySpace::kHost};
  // backends want their workspace aligned; the vector holds one alignment step more
  const auto base = reinterpret_cast<std::uintptr_t>(workspace_.data());
  void* aligned = workspace_.data() + ((kWorkspaceAlign - base % kWorkspaceAlign) % kWorkspaceAlign);
  a.workspace = {aligned, workspace_bytes_, MemorySpace::kHost};
  a.report = report;
  return plan.execute(a);
}

Status ExpertFfn::forward(const float* in, const float* w_up, const float* w_down, const std::int64_t* gs, float* up,
                          float* act, float* out, std::int64_t* dropped_rows) {
  ExecuteReport report;
  RAGDOT_RETURN_IF_ERROR(run(plans_[kUp], in, w_up, gs, up, &report));
  if (dropped_rows) *dropped_rows = report.dropped_rows;
  swiglu(up, rows_, ffn_, act);
  return run(plans_[kDown], act, w_down, gs, out);
}

Status ExpertFfn::backward(const float* in, const float* up, const float* act, const float* w_up, const float* w_down,
                           const std::int64_t* gs, const float* d_out, float* d_act, float* d_up, float* d_in,
                           float* d_w_up, float* d_w_down) {
  RAGDOT_RETURN_IF_ERROR(run(plans_[kDataGradAct], d_out, w_down, gs, d_act));
  if (d_w_down) RAGDOT_RETURN_IF_ERROR(run(plans_[kWeightGradDown], act, d_out, gs, d_w_down));
  swiglu_backward(up, d_act, rows_, ffn_, d_up);
  RAGDOT_RETURN_IF_ERROR(run(plans_[kDataGradIn], d_up, w_up, gs, d_in));
  if (d_w_up) RAGDOT_RETURN_IF_ERROR(run(plans_[kWeightGradUp], in, d_up, gs, d_w_up));
  return Status::ok();
}

std::string ExpertFfn::describe() const {
  static const char* names[] = {"up", "down", "d_act", "d_in", "d_w_down", "d_w_up"};
  std::string s;
  for (std::size_t i = 0; i < plans_.size(); ++i) s += std::string(names[i]) + ": " + plans_[i].to_string() + "\n";
  return s;
}

void swiglu(const float* up, std::int64_t rows, std::int64_t ffn, float* act) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* g = up + r * 2 * ffn;
    const float* u = g + ffn;
    float* a = act + r * ffn;
    for (std::int64_t c = 0; c < ffn; ++c) a[c] = g[c] * sigmoid(g[c]) * u[c];
  }
}

void swiglu_backward(const float* up, const float* d_act, std::int64_t rows, std::int64_t ffn, float* d_up) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* g = up + r * 2 * ffn;
    const float* u = g + ffn;
    const float* da = d_act + r * ffn;
    float* dg = d_up + r * 2 * ffn;
    float* du = dg + ffn;
    for (std::int64_t c = 0; c < ffn; ++c) {
      const float s = sigmoid(g[c]);
      const float silu = g[c] * s;
      dg[c] = da[c] * u[c] * s * (1.0f + g[c] * (1.0f - s));  // d silu / d g = s (1 + g (1 - s))
      du[c] = da[c] * silu;
    }
  }
}

}  // namespace ragdot::moe
