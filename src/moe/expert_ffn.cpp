#include "moe/expert_ffn.hpp"

#include "moe/gated_activation.hpp"

namespace ragdot::moe {

Result<ExpertFfn> ExpertFfn::create(std::int64_t rows, std::int64_t groups, std::int64_t hidden, std::int64_t ffn,
                                    GatedActivation activation, const PlanOptions& options, HostWorkspace& ws) {
  RAGDOT_RETURN_IF_ERROR(check_activation("expert FFN", activation));
  if (rows < 0 || groups < 1 || hidden < 1 || ffn < 1)
    return invalid_argument("expert FFN: rows >= 0, groups, hidden and ffn >= 1 (got rows " + std::to_string(rows) +
                            ", groups " + std::to_string(groups) + ", hidden " + std::to_string(hidden) + ", ffn " +
                            std::to_string(ffn) + ")");
  ExpertFfn f;
  f.rows_ = rows, f.ffn_ = ffn;
  f.activation_ = activation;
  for (const RaggedDotSpec& spec : expert_ffn_specs(rows, groups, hidden, ffn)) {
    RAGDOT_ASSIGN_OR_RETURN(Plan plan, plan_host(spec, options, ws));
    f.plans_.push_back(std::move(plan));
  }
  return f;
}

Status ExpertFfn::forward(const float* in, const float* w_up, const float* w_down, const std::int64_t* gs, float* up,
                          float* act, float* out, MutableBuffer ws, std::int64_t* dropped_rows) const {
  ExecuteReport report;
  RAGDOT_RETURN_IF_ERROR(run_host(plans_[kFfnUp], in, w_up, gs, up, ws, &report));
  if (dropped_rows) *dropped_rows = report.dropped_rows;
  gated_activation(activation_, up, rows_, ffn_, act);
  return run_host(plans_[kFfnDown], act, w_down, gs, out, ws);
}

Status ExpertFfn::backward(const float* in, const float* up, const float* act, const float* w_up, const float* w_down,
                           const std::int64_t* gs, const float* d_out, float* d_act, float* d_up, float* d_in,
                           float* d_w_up, float* d_w_down, MutableBuffer ws) const {
  RAGDOT_RETURN_IF_ERROR(run_host(plans_[kFfnDataGradAct], d_out, w_down, gs, d_act, ws));
  if (d_w_down) RAGDOT_RETURN_IF_ERROR(run_host(plans_[kFfnWeightGradDown], act, d_out, gs, d_w_down, ws));
  gated_activation_backward(activation_, up, d_act, rows_, ffn_, d_up);
  RAGDOT_RETURN_IF_ERROR(run_host(plans_[kFfnDataGradIn], d_up, w_up, gs, d_in, ws));
  if (d_w_up) RAGDOT_RETURN_IF_ERROR(run_host(plans_[kFfnWeightGradUp], in, d_up, gs, d_w_up, ws));
  return Status::ok();
}

std::string ExpertFfn::describe() const {
  std::string s;
  for (std::size_t i = 0; i < plans_.size(); ++i) s += std::string(expert_ffn_gemm_name(int(i))) + ": " + plans_[i].to_string() + "\n";
  return s;
}

}  // namespace ragdot::moe
