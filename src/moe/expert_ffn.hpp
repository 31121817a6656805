// The expert FFN of an MoE layer as six planned ragged dots over expert-sorted rows: forward
// (gate and up fused, a gated activation, down) and backward (data gradients by mode 1 against
// the transposed weights, weight gradients by mode 2, ragged along the rows). Shared experts use the same with
// one group holding every token.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "moe/host_gemm.hpp"
#include "ragdot/moe.hpp"
#include "ragdot/plan.hpp"
#include "ragdot/status.hpp"

namespace ragdot::moe {

class ExpertFfn {
 public:
  static Result<ExpertFfn> create(std::int64_t rows, std::int64_t groups, std::int64_t hidden, std::int64_t ffn,
                                  GatedActivation activation, const PlanOptions& options, HostWorkspace& ws);

  // The plans' workspace goes into `ws` (create grows it; forward and backward take its buffer).
  // up [M, 2F], act [M, F] (kept for backward) and out [M, H] from in [M, H]; gs [G] int64.
  // *dropped_rows (if given): rows the up GEMM dropped at a padded backend's capacity.
  Status forward(const float* in, const float* w_up, const float* w_down, const std::int64_t* gs, float* up,
                 float* act, float* out, MutableBuffer ws, std::int64_t* dropped_rows = nullptr) const;
  // d_in [M, H] and (where not null) d_w_up [G, H, 2F], d_w_down [G, F, H] from d_out [M, H];
  // d_up [M, 2F] and d_act [M, F] are scratch.
  Status backward(const float* in, const float* up, const float* act, const float* w_up, const float* w_down,
                  const std::int64_t* gs, const float* d_out, float* d_act, float* d_up, float* d_in, float* d_w_up,
                  float* d_w_down, MutableBuffer ws) const;

  std::string describe() const;

 private:
  ExpertFfn() = default;

  std::int64_t rows_ = 0, ffn_ = 0;
  GatedActivation activation_ = GatedActivation::kSwiGLU;
  std::vector<Plan> plans_;  // up, down, d_act, d_in, d_w_down, d_w_up
};

}  // namespace ragdot::moe
