// The routers of the presets, per token: which experts, with which combine weights, and the
// gradient of the logits from the gradients of those weights (and of Llama-4's input scale).
#pragma once

#include <cstdint>

#include "ragdot/workloads.hpp"

namespace ragdot::moe {

struct RouteChoice {
  std::int32_t* experts;  // [k] out
  float* weights;         // [k] out
  float* input_scale;     // [1] out
};

// logits [E] of one token -> its choice. Ties go to the lower expert index, so routing is
// deterministic. DeepSeek-V3 selects by sigmoid + bias (bias may be null) and weighs by the
// unbiased sigmoids, renormalized and multiplied by `scaling`.
// `scratch` holds `experts` doubles (the caller's, so routing allocates nothing per token).
void route_token(workloads::RouterKind kind, const float* logits, const float* bias, std::int64_t experts,
                 std::int64_t k, double scaling, RouteChoice out, double* scratch);

// d logits [E] (overwritten) of one token from d weights [k] and d input_scale, for the choice
// route_token made from the same logits.
void route_token_backward(workloads::RouterKind kind, const float* logits, std::int64_t experts, std::int64_t k,
                          double scaling, const std::int32_t* chosen, const float* d_weights, float d_input_scale,
                          float* d_logits, double* scratch);

}  // namespace ragdot::moe
