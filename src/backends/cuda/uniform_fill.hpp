// Counter-based uniform fills of device memory (kernels/ragdot/fill_uniform.cuh): the MoE layer's
// parameters and a measured plan's trial operands, in milliseconds instead of a host upload.
#pragma once

#include <cstdint>

#include "backends/cuda/device.hpp"
#include "ragdot/dtype.hpp"
#include "ragdot/status.hpp"

namespace ragdot::cuda {

// Fills `count` elements (bf16, f16 or f32) at `data` on `stream` with values in [-scale, scale)
// that depend only on (seed, index) (fill_params.h: the host computes the same values).
Status fill_uniform(const Device& device, void* data, DType dtype, std::int64_t count, std::uint32_t seed, float scale,
                    CUstream stream);

}  // namespace ragdot::cuda
