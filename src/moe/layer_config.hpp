// The checks of a layer's configuration that the host and the device layers share.
#pragma once

#include <cstdint>

#include "ragdot/moe.hpp"

namespace ragdot::moe {

// invalid_argument naming what is wrong: sizes below 1, a top-k past the experts, an activation
// outside GatedActivation, Llama-4's router with a top-k other than 1, no tokens.
Status check_layer_config(const MoeConfig& config, std::int64_t tokens);

}  // namespace ragdot::moe
