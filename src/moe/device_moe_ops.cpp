#include "moe/device_moe_ops.hpp"

#include <algorithm>
#include <string>

#include "backends/cuda/cuda_driver.hpp"
#include "backends/cuda/device.hpp"
#include "backends/cuda/loaded_kernel.hpp"
#include "moe/gated_activation.hpp"

extern "C" {
#include "ragdot/moe_params.h"
}

namespace ragdot::moe {

namespace {
constexpr std::int64_t kMaxGrid = 65535;
constexpr unsigned kElementThreads = 256;

Status check_rows_dtype(const char* what, DType dtype) {
  if (dtype == DType::kBF16 || dtype == DType::kF32) return Status::ok();
  return unsupported(std::string(what) + ": rows of " + std::string(dtype_name(dtype)) +
                     "; the device kernels take bf16 or f32");
}

// Blocks of a grid-stride loop over `count` items, 8 per thread where the kernel vectorizes.
unsigned element_blocks(std::int64_t count) {
  return unsigned(std::clamp<std::int64_t>((count / 8 + kElementThreads - 1) / kElementThreads, 1, kMaxGrid));
}
}  // namespace

struct DeviceMoeOps::State {
  const cuda::Device* device = nullptr;
  std::shared_ptr<const cuda::LoadedModule> route_module, glu_module, accumulate_module;
  CUfunction route = nullptr, route_backward = nullptr, glu = nullptr, glu_backward = nullptr,
             glu_backward_weighted = nullptr, accumulate = nullptr;
  workloads::RouterKind kind = workloads::RouterKind::kSoftmaxTopK;
  std::int64_t experts = 0, top_k = 0;
  double scaling = 1.0;

  Status launch(CUfunction f, unsigned blocks, unsigned threads, void* params, void* stream, const char* what) const {
    cuda::ScopedContext ctx(device->context);
    RAGDOT_RETURN_IF_ERROR(ctx.status());
    void* args[] = {params};
    RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuLaunchKernel(f, blocks, 1, 1, threads, 1, 1, 0,
                                                             static_cast<CUstream>(stream), args, nullptr),
                              what);
    return Status::ok();
  }
  RagdotMoeRouteParams route_params(const float* logits, std::int64_t tokens, void* experts) const {
    RagdotMoeRouteParams p{};
    p.logits = logits;
    p.tokens = tokens;
    p.num_experts = int(this->experts);
    p.top_k = int(top_k);
    p.kind = int(kind);
    p.scaling = float(scaling);
    p.experts = static_cast<int*>(experts);
    return p;
  }
  static unsigned route_blocks(std::int64_t tokens) {
    return unsigned((tokens + RAGDOT_MOE_ROUTE_WARPS - 1) / RAGDOT_MOE_ROUTE_WARPS);
  }
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
  RAGDOT_ASSIGN_OR_RETURN(s->glu_module,
                          cuda::load_module(*s->device, "#include \"ragdot/moe_glu.cuh\"\n", "ragdot_moe_glu.cu"));
  RAGDOT_ASSIGN_OR_RETURN(
      s->accumulate_module,
      cuda::load_module(*s->device, "#include \"ragdot/moe_accumulate.cuh\"\n", "ragdot_moe_accumulate.cu"));
  const struct {
    CUfunction* f;
    CUmodule module;
    const char* name;
  } fns[] = {{&s->route, s->route_module->module, "ragdot_moe_route"},
             {&s->route_backward, s->route_module->module, "ragdot_moe_route_backward"},
             {&s->glu, s->glu_module->module, "ragdot_moe_glu"},
             {&s->glu_backward, s->glu_module->module, "ragdot_moe_glu_backward"},
             {&s->glu_backward_weighted, s->glu_module->module, "ragdot_moe_glu_backward_weighted"},
             {&s->accumulate, s->accumulate_module->module, "ragdot_moe_accumulate"}};
  for (const auto& f : fns) RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuModuleGetFunction(f.f, f.module, f.name), f.name);
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
  if (tokens / RAGDOT_MOE_ROUTE_WARPS >= 0x7fffffff) return invalid_argument("route: too many tokens (" + std::to_string(tokens) + ")");
  RagdotMoeRouteParams p = s_->route_params(logits, tokens, experts);
  p.bias = s_->kind == workloads::RouterKind::kDeepSeekV3 ? bias : nullptr;
  p.weights = weights;
  p.input_scale = input_scale;
  return s_->launch(s_->route, State::route_blocks(tokens), 32 * RAGDOT_MOE_ROUTE_WARPS, &p, stream,
                    "launching ragdot_moe_route");
}

Status DeviceMoeOps::route_backward(const float* logits, const void* experts, const float* d_weights,
                                    const float* d_scale, std::int64_t tokens, void* d_logits, void* stream) const {
  if (tokens < 0) return invalid_argument("route_backward: negative token count " + std::to_string(tokens));
  if (tokens == 0) return Status::ok();
  if (!logits || !experts || !d_weights || !d_logits) return invalid_argument("route_backward: a null device buffer");
  if (s_->kind == workloads::RouterKind::kLlama4 && !d_scale)
    return invalid_argument("route_backward: the Llama-4 router needs the input scale's gradient");
  if (tokens / RAGDOT_MOE_ROUTE_WARPS >= 0x7fffffff) {
    return invalid_argument("route_backward: too many tokens (" + std::to_string(tokens) + ")");
  }
  RagdotMoeRouteParams p = s_->route_params(logits, tokens, const_cast<void*>(experts));
  p.d_weights = d_weights;
  p.d_scale = d_scale;
  p.d_logits = d_logits;
  return s_->launch(s_->route_backward, State::route_blocks(tokens), 32 * RAGDOT_MOE_ROUTE_WARPS, &p, stream,
                    "launching ragdot_moe_route_backward");
}

namespace {

// The kernels' RAGDOT_MOE_GLU_* code of an activation (check_activation has passed).
int glu_code(GatedActivation a) {
  switch (a) {
    case GatedActivation::kSwiGLU: return RAGDOT_MOE_GLU_SILU;
    case GatedActivation::kGeGLU: return RAGDOT_MOE_GLU_GELU;
    case GatedActivation::kGeGLUTanh: return RAGDOT_MOE_GLU_GELU_TANH;
  }
  return -1;
}

Status check_glu(const char* what, GatedActivation a, DType dtype) {
  RAGDOT_RETURN_IF_ERROR(check_rows_dtype(what, dtype));
  return check_activation(what, a);
}

// The params every gated-activation kernel reads: rows of up [rows, 2 ffn] of `dtype`.
RagdotMoeGluParams glu_params(GatedActivation a, const void* up, std::int64_t rows, std::int64_t ffn, DType dtype) {
  RagdotMoeGluParams p{};
  p.up = up;
  p.rows = rows;
  p.ffn = ffn;
  p.elem_bytes = int(dtype_size(dtype));
  p.activation = glu_code(a);
  return p;
}

}  // namespace

Status DeviceMoeOps::glu(GatedActivation a, const void* up, std::int64_t rows, std::int64_t ffn, DType dtype, void* act,
                         void* stream) const {
  RAGDOT_RETURN_IF_ERROR(check_glu("glu", a, dtype));
  if (rows < 0 || ffn < 0) return invalid_argument("glu: negative rows or ffn");
  if (rows == 0 || ffn == 0) return Status::ok();
  if (!up || !act) return invalid_argument("glu: a null device buffer");
  RagdotMoeGluParams p = glu_params(a, up, rows, ffn, dtype);
  p.act = act;
  return s_->launch(s_->glu, element_blocks(rows * ffn), kElementThreads, &p, stream, "launching ragdot_moe_glu");
}

Status DeviceMoeOps::glu_backward(GatedActivation a, const void* up, const void* d_act, std::int64_t rows,
                                  std::int64_t ffn, DType dtype, void* d_up, void* stream) const {
  RAGDOT_RETURN_IF_ERROR(check_glu("glu_backward", a, dtype));
  if (rows < 0 || ffn < 0) return invalid_argument("glu_backward: negative rows or ffn");
  if (rows == 0 || ffn == 0) return Status::ok();
  if (!up || !d_act || !d_up) return invalid_argument("glu_backward: a null device buffer");
  RagdotMoeGluParams p = glu_params(a, up, rows, ffn, dtype);
  p.d_act = d_act;
  p.d_up = d_up;
  return s_->launch(s_->glu_backward, element_blocks(rows * ffn), kElementThreads, &p, stream,
                    "launching ragdot_moe_glu_backward");
}

Status DeviceMoeOps::glu_backward_weighted(GatedActivation a, const void* up, const void* g, const int* pair_of,
                                           const float* weights, std::int64_t rows, std::int64_t ffn, DType dtype,
                                           void* d_up, float* d_weights, void* stream) const {
  RAGDOT_RETURN_IF_ERROR(check_glu("glu_backward_weighted", a, dtype));
  if (rows < 0 || ffn < 0) return invalid_argument("glu_backward_weighted: negative rows or ffn");
  if (rows == 0) return Status::ok();
  if (!up || !g || !pair_of || !weights || !d_up || !d_weights) {
    return invalid_argument("glu_backward_weighted: a null device buffer");
  }
  RagdotMoeGluParams p = glu_params(a, up, rows, ffn, dtype);
  p.d_act = g;
  p.d_up = d_up;
  p.pair_of = pair_of;
  p.weights = weights;
  p.dots = d_weights;
  // one warp per row, about four rows per warp (it loads the next row's pair during one), within
  // what the GPU holds at once
  constexpr std::int64_t kRowsPerBlock = kElementThreads / 32 * 4;
  const std::int64_t blocks = std::min<std::int64_t>((rows + kRowsPerBlock - 1) / kRowsPerBlock,
                                                     std::int64_t(s_->device->multiprocessors) * 8);
  return s_->launch(s_->glu_backward_weighted, unsigned(blocks), kElementThreads, &p, stream,
                    "launching ragdot_moe_glu_backward_weighted");
}

Status DeviceMoeOps::accumulate(void* y, const void* x, std::int64_t count, DType dtype, void* stream) const {
  RAGDOT_RETURN_IF_ERROR(check_rows_dtype("accumulate", dtype));
  if (count < 0) return invalid_argument("accumulate: negative count");
  if (count == 0) return Status::ok();
  if (!y || !x) return invalid_argument("accumulate: a null device buffer");
  RagdotMoeAccumulateParams p{};
  p.y = y;
  p.x = x;
  p.count = count;
  p.elem_bytes = int(dtype_size(dtype));
  return s_->launch(s_->accumulate, element_blocks(count), kElementThreads, &p, stream,
                    "launching ragdot_moe_accumulate");
}

}  // namespace ragdot::moe
