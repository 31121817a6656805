#include "moe/device_moe_ops.hpp"

#include <algorithm>
#include <string>

#include "backends/cuda/cuda_driver.hpp"
#include "backends/cuda/device.hpp"
#include "backends/cuda/loaded_kernel.hpp"

extern "C" {
#include "ragdot/moe_params.h"
}

namespace ragdot::moe {

namespace {
constexpr std::int64_t kMaxGrid = 65535;
}  // namespace

struct DeviceMoeOps::State {
  const cuda::Device* device = nullptr;
  std::shared_ptr<const cuda::LoadedModule> route_module, swiglu_module;
  CUfunction route = nullptr, swiglu = nullptr;
  workloads::RouterKind kind = workloads::RouterKind::kSoftmaxTopK;
  std::int64_t experts = 0, top_k = 0;
  double scaling = 1.0;
};

DeviceMoeOps::DeviceMoeOps(std::unique_ptr<State> s) : s_(std::move(s)) {}
DeviceMoeOps::DeviceMoeOps(DeviceMoeOps&&) noexcept = default;
DeviceMoeOps& DeviceMoeOps::operator=(DeviceMoeOps&&) noexcept = default;
DeviceMoeOps::~DeviceMoeOps() = default;

Result<DeviceMoeOps> DeviceMoeOps::create(int device, workloads::RouterKind kind, std::int64_t experts,
                                          std::int64_t top_k, double scaling) {
  if (experts < 1 || experts > RAGDOT_MOE_MAX_EXPERTS) {
    return invalid_argument("the device router takes 1 to " + std::to_string(RAGDOT_MOE_MAX_EXPERTS) +
                            " experts, got " + std::to_string(experts));
  }
  if (top_k < 1 || top_k > std::min<std::int64_t>(experts, RAGDOT_MOE_MAX_TOP_K)) {
    return invalid_argument("the device router takes a top-k of 1 to min(experts, " +
                            std::to_string(RAGDOT_MOE_MAX_TOP_K) + "), got " + std::to_string(top_k));
  }
  auto s = std::make_unique<State>();
  RAGDOT_ASSIGN_OR_RETURN(s->device, cuda::device(device));
  RAGDOT_ASSIGN_OR_RETURN(s->route_module,
                          cuda::load_module(*s->device, "#include \"ragdot/moe_route.cuh\"\n", "ragdot_moe_route.cu"));
  RAGDOT_ASSIGN_OR_RETURN(s->swiglu_module,
                          cuda::load_module(*s->device, "#include \"ragdot/moe_swiglu.cuh\"\n", "ragdot_moe_swiglu.cu"));
  RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuModuleGetFunction(&s->route, s->route_module->module, "ragdot_moe_route"),
                            "ragdot_moe_route");
  RAGDOT_CU_RETURN_IF_ERROR(
      cuda::driver()->cuModuleGetFunction(&s->swiglu, s->swiglu_module->module, "ragdot_moe_swiglu"),
      "ragdot_moe_swiglu");
  s->kind = kind;
  s->experts = experts;
  s->top_k = top_k;
  s->scaling = scaling;
  return DeviceMoeOps(std::move(s));
}

Status DeviceMoeOps::route(const float* logits, const float* bias, std::int64_t tokens, void* experts, float* weights,
                           float* input_scale, void* stream) const {
  if (tokens < 0) return invalid_argument("route: negative token count " + std::to_string(tokens));
  if (tokens == 0) return Status::ok();
  if (!logits || !experts || !weights || !input_scale) return invalid_argument("route: a null device buffer");
  const std::int64_t blocks = (tokens + RAGDOT_MOE_ROUTE_WARPS - 1) / RAGDOT_MOE_ROUTE_WARPS;
  if (blocks > 0x7fffffff) return invalid_argument("route: too many tokens (" + std::to_string(tokens) + ")");
  cuda::ScopedContext ctx(s_->device->context);
  RAGDOT_RETURN_IF_ERROR(ctx.status());
  RagdotMoeRouteParams p{};
  p.logits = logits;
  p.bias = s_->kind == workloads::RouterKind::kDeepSeekV3 ? bias : nullptr;
  p.tokens = tokens;
  p.num_experts = int(s_->experts);
  p.top_k = int(s_->top_k);
  p.kind = int(s_->kind);
  p.scaling = float(s_->scaling);
  p.experts = static_cast<int*>(experts);
  p.weights = weights;
  p.input_scale = input_scale;
  void* args[] = {&p};
  RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuLaunchKernel(s_->route, unsigned(blocks), 1, 1,
                                                           32 * RAGDOT_MOE_ROUTE_WARPS, 1, 1, 0,
                                                           static_cast<CUstream>(stream), args, nullptr),
                            "launching ragdot_moe_route");
  return Status::ok();
}

Status DeviceMoeOps::swiglu(const void* up, std::int64_t rows, std::int64_t ffn, DType dtype, void* act,
                            void* stream) const {
  if (dtype != DType::kBF16 && dtype != DType::kF32) {
    return unsupported("swiglu: rows of " + std::string(dtype_name(dtype)) + "; the device activation takes bf16 or f32");
  }
  if (rows < 0 || ffn < 0) return invalid_argument("swiglu: negative rows or ffn");
  if (rows == 0 || ffn == 0) return Status::ok();
  if (!up || !act) return invalid_argument("swiglu: a null device buffer");
  cuda::ScopedContext ctx(s_->device->context);
  RAGDOT_RETURN_IF_ERROR(ctx.status());
  RagdotMoeSwigluParams p{};
  p.up = up;
  p.act = act;
  p.rows = rows;
  p.ffn = ffn;
  p.elem_bytes = int(dtype_size(dtype));
  void* args[] = {&p};
  const std::int64_t blocks = std::min<std::int64_t>((rows * ffn + 255) / 256, kMaxGrid);
  RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuLaunchKernel(s_->swiglu, unsigned(blocks), 1, 1, 256, 1, 1, 0,
                                                           static_cast<CUstream>(stream), args, nullptr),
                            "launching ragdot_moe_swiglu");
  return Status::ok();
}

}  // namespace ragdot::moe
