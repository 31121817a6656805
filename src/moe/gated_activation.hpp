// The expert FFN's gated activations on the host (MoeConfig::activation): act = a(gate) * up of
// the up projection's [gate | up] rows, and the backward into [d_gate | d_up], in f32.
#pragma once

#include <cstdint>

#include "ragdot/moe.hpp"
#include "ragdot/status.hpp"

namespace ragdot::moe {

inline constexpr GatedActivation kGatedActivations[] = {GatedActivation::kSwiGLU, GatedActivation::kGeGLU,
                                                        GatedActivation::kGeGLUTanh};

// invalid_argument, prefixed by `what`, for a value outside GatedActivation.
Status check_activation(const char* what, GatedActivation a);

// act [rows, ffn] from up [rows, 2 ffn].
void gated_activation(GatedActivation a, const float* up, std::int64_t rows, std::int64_t ffn, float* act);
// d_up [rows, 2 ffn] from up [rows, 2 ffn] and d_act [rows, ffn].
void gated_activation_backward(GatedActivation a, const float* up, const float* d_act, std::int64_t rows,
                               std::int64_t ffn, float* d_up);

}  // namespace ragdot::moe
