#include "backends/cuda/uniform_fill.hpp"

#include <algorithm>
#include <string>

#include "backends/cuda/loaded_kernel.hpp"

extern "C" {
#include "ragdot/fill_params.h"
}

namespace ragdot::cuda {

Status fill_uniform(const Device& device, void* data, DType dtype, std::int64_t count, std::uint32_t seed, float scale,
                    CUstream stream) {
  if (dtype != DType::kBF16 && dtype != DType::kF16 && dtype != DType::kF32) {
    return unsupported("fill_uniform: " + std::string(dtype_name(dtype)) + "; it fills bf16, f16 or f32");
  }
  if (count < 0) return invalid_argument("fill_uniform: negative count " + std::to_string(count));
  if (count == 0) return Status::ok();
  if (!data) return invalid_argument("fill_uniform: a null device buffer");
  RAGDOT_ASSIGN_OR_RETURN(std::shared_ptr<const LoadedModule> module,
                          load_module(device, "#include \"ragdot/fill_uniform.cuh\"\n", "ragdot_fill_uniform.cu"));
  CUfunction f = nullptr;
  RAGDOT_CU_RETURN_IF_ERROR(driver()->cuModuleGetFunction(&f, module->module, "ragdot_fill_uniform"),
                            "ragdot_fill_uniform");
  ScopedContext ctx(device.context);
  RAGDOT_RETURN_IF_ERROR(ctx.status());
  RagdotFillParams p{};
  p.data = data;
  p.count = count;
  p.elem_bytes = int(dtype_size(dtype));
  p.is_f16 = dtype == DType::kF16 ? 1 : 0;
  p.seed = seed;
  p.scale = scale;
  void* args[] = {&p};
  const unsigned blocks = unsigned(std::clamp<std::int64_t>((count + 255) / 256, 1, 65535));
  RAGDOT_CU_RETURN_IF_ERROR(driver()->cuLaunchKernel(f, blocks, 1, 1, 256, 1, 1, 0, stream, args, nullptr),
                            "launching ragdot_fill_uniform");
  return Status::ok();
}

}  // namespace ragdot::cuda
