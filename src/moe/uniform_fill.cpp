// The host side of kernels/ragdot/fill_uniform.cuh: element i of a uniform fill with seed s, from
// the same code the kernel runs (fill_params.h). bench/moe_layer_peers.py reproduces it with NumPy.
#include <cstdint>

#include "ragdot/moe_device.hpp"

extern "C" {
#include "ragdot/fill_params.h"
}

namespace ragdot::moe {

float uniform_fill_value(std::uint32_t seed, std::uint64_t index, float scale) {
  return ragdot_fill_value(seed, index, scale);
}

}  // namespace ragdot::moe
