// The ragged dots of the MoE layer (the expert FFN's and the router's): their specs, shared by the
// host layer (f32) and the device layer (bf16), and for the host one aligned workspace they all
// share, sized at plan time.
#pragma once

#include <cstdint>
#include <vector>

#include "ragdot/plan.hpp"
#include "ragdot/status.hpp"

namespace ragdot::moe {

// Operand and group-size dtypes of the specs below (the output follows JAX's rule unless a
// caller sets preferred_element_type).
struct GemmDTypes {
  DType operands = DType::kF32;
  DType group_sizes = DType::kI64;
};

// lhs [m, a] against per-group rhs [g, a, b] (mode 1), or rhs [g, b, a] contracting its last dim.
RaggedDotSpec grouped_spec(std::int64_t m, std::int64_t a, std::int64_t b, std::int64_t g, bool rhs_transposed,
                           GemmDTypes types = {});
// [g, a, b] = per group lhs[rows, a]^T rhs[rows, b] (mode 2, ragged along the rows).
RaggedDotSpec weight_gradient_spec(std::int64_t m, std::int64_t a, std::int64_t b, std::int64_t g,
                                   GemmDTypes types = {});

// The expert FFN's six ragged dots over `rows` expert-sorted rows, in ExpertFfnGemm order.
enum ExpertFfnGemm { kFfnUp, kFfnDown, kFfnDataGradAct, kFfnDataGradIn, kFfnWeightGradDown, kFfnWeightGradUp };
std::vector<RaggedDotSpec> expert_ffn_specs(std::int64_t rows, std::int64_t groups, std::int64_t hidden,
                                            std::int64_t ffn, GemmDTypes types = {});
const char* expert_ffn_gemm_name(int gemm);  // "up", "down", "d_act", "d_in", "d_w_down", "d_w_up"

// The router's three products, one group holding every token, in RouterGemm order.
enum RouterGemm { kRouterLogits, kRouterDataGrad, kRouterWeightGrad };
std::vector<RaggedDotSpec> router_specs(std::int64_t tokens, std::int64_t hidden, std::int64_t experts,
                                        GemmDTypes types = {});

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
// The lhs of a plan made with PlanOptions::lhs_gather_rows: a table of rows and the int32 index
// (one entry per row of the op's lhs) through which the plan reads it.
struct GatheredLhs {
  std::size_t table_bytes = 0;
  const void* rows = nullptr;
};

// The out of a plan made with PlanOptions::out_scatter_rows: an f32 table, and the int32 index
// and float32 factors (one entry per row of the op's lhs) with which the plan adds its rows in.
struct ScatteredOut {
  std::size_t table_bytes = 0;
  const void* rows = nullptr;
  const void* scales = nullptr;
};

// Runs a plan on buffers of its memory space, sized as its op says (lhs: the table, when
// `gathered` says so; out: the scatter table, when `scattered` does, or `out_bytes` when not 0,
// as for a SwiGLU epilogue's activations); `stream` for device plans.
Status run_plan(const Plan& plan, const void* lhs, const void* rhs, const void* gs, void* out, MutableBuffer ws,
                void* stream, ExecuteReport* report = nullptr, const GatheredLhs* gathered = nullptr,
                const ScatteredOut* scattered = nullptr, std::size_t out_bytes = 0);

}  // namespace ragdot::moe
