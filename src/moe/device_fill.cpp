// fill_device_uniform: kernels/ragdot/fill_uniform.cuh on the caller's stream.
#include <algorithm>
#include <string>

#include "backends/cuda/cuda_driver.hpp"
#include "backends/cuda/device.hpp"
#include "backends/cuda/loaded_kernel.hpp"
#include "ragdot/moe_device.hpp"

extern "C" {
#include "ragdot/fill_params.h"
}

namespace ragdot::moe {

Status fill_device_uniform(int device, void* data, DType dtype, std::int64_t count, std::uint32_t seed, float scale,
                           void* stream) {
  if (dtype != DType::kBF16 && dtype != DType::kF32) {
    return unsupported("fill_device_uniform: " + std::string(dtype_name(dtype)) + "; it fills bf16 or f32");
  }
  if (count < 0) return invalid_argument("fill_device_uniform: negative count " + std::to_string(count));
  if (count == 0) return Status::ok();
  if (!data) return invalid_argument("fill_device_uniform: a null device buffer");
  RAGDOT_ASSIGN_OR_RETURN(const cuda::Device* dev, cuda::device(device));
  RAGDOT_ASSIGN_OR_RETURN(std::shared_ptr<const cuda::LoadedModule> module,
                          cuda::load_module(*dev, "#include \"ragdot/fill_uniform.cuh\"\n", "ragdot_fill_uniform.cu"));
  CUfunction f = nullptr;
  RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuModuleGetFunction(&f, module->module, "ragdot_fill_uniform"),
                            "ragdot_fill_uniform");
  cuda::ScopedContext ctx(dev->context);
  RAGDOT_RETURN_IF_ERROR(ctx.status());
  RagdotFillParams p{};
  p.data = data;
  p.count = count;
  p.elem_bytes = int(dtype_size(dtype));
  p.seed = seed;
  p.scale = scale;
  void* args[] = {&p};
  const unsigned blocks = unsigned(std::clamp<std::int64_t>((count + 255) / 256, 1, 65535));
  RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuLaunchKernel(f, blocks, 1, 1, 256, 1, 1, 0,
                                                           static_cast<CUstream>(stream), args, nullptr),
                            "launching ragdot_fill_uniform");
  return Status::ok();
}

}  // namespace ragdot::moe
