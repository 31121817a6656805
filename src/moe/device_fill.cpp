// fill_device_uniform: kernels/ragdot/fill_uniform.cuh on the caller's stream (cuda::fill_uniform).
#include "backends/cuda/uniform_fill.hpp"
#include "ragdot/moe_device.hpp"

namespace ragdot::moe {

Status fill_device_uniform(int device, void* data, DType dtype, std::int64_t count, std::uint32_t seed, float scale,
                           void* stream) {
  RAGDOT_ASSIGN_OR_RETURN(const cuda::Device* dev, cuda::device(device));
  return cuda::fill_uniform(*dev, data, dtype, count, seed, scale, static_cast<CUstream>(stream));
}

}  // namespace ragdot::moe
