// One MoE layer on ragged dots: router, permutation of the (token, slot) pairs by expert, the
// expert FFN (gate and up fused in one ragged dot, a gated activation such as SwiGLU, one ragged
// dot down), shared experts, weighted combine; forward and backward. Host memory, f32
// activations and parameters; the ragged dots run on a planned backend (the cpu backend by
// default).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ragdot/plan.hpp"
#include "ragdot/status.hpp"
#include "ragdot/workloads.hpp"

namespace ragdot::moe {

// The expert FFN's gated activation of the up projection's [gate | up] halves: act = a(gate) * up.
enum class GatedActivation {
  kSwiGLU,     // a = silu (Mixtral, DeepSeek-V3, Qwen3, Llama 4: every preset)
  kGeGLU,      // a = gelu, exact: g Phi(g) with the normal CDF through erf (torch's gelu default)
  kGeGLUTanh,  // a = gelu's tanh approximation (jax.nn.gelu's default, Gemma's gelu_pytorch_tanh)
};
// "swiglu", "geglu", "geglu_tanh"
const char* activation_name(GatedActivation a);
// The inverse of activation_name; invalid_argument naming the known names otherwise.
Result<GatedActivation> parse_activation(std::string_view name);

struct MoeConfig {
  std::int64_t hidden = 0;          // H
  std::int64_t ffn = 0;             // F, per expert (the up projection has 2F columns: gate, up)
  std::int64_t experts = 0;         // E
  std::int64_t top_k = 1;
  std::int64_t shared_experts = 0;  // S, each a dense FFN of width F over every token
  workloads::RouterKind router = workloads::RouterKind::kSoftmaxTopK;
  double routed_scaling = 1.0;      // multiplies the combine weights (DeepSeek-V3: 2.5)
  GatedActivation activation = GatedActivation::kSwiGLU;  // routed and shared experts alike
};

// A preset's layer (workloads::presets()), with hidden and ffn divided by `shrink` (for CPU sizes).
Result<MoeConfig> preset_config(std::string_view preset, std::int64_t shrink = 1);

// Parameters, row-major f32. router_bias only for DeepSeek-V3 (selection only; may be null:
// zeros); shared_* only when shared_experts > 0.
struct MoeParams {
  const float* router = nullptr;       // [H, E]
  const float* router_bias = nullptr;  // [E]
  const float* w_up = nullptr;         // [E, H, 2F]: columns [0, F) gate, [F, 2F) up
  const float* w_down = nullptr;       // [E, F, H]
  const float* shared_up = nullptr;    // [S, H, 2F]
  const float* shared_down = nullptr;  // [S, F, H]
};

// Gradients, overwritten (null: not wanted, except d_x which backward always computes).
struct MoeGrads {
  float* d_x = nullptr;          // [T, H]
  float* d_router = nullptr;     // [H, E]
  float* d_w_up = nullptr;       // [E, H, 2F]
  float* d_w_down = nullptr;     // [E, F, H]
  float* d_shared_up = nullptr;  // [S, H, 2F]
  float* d_shared_down = nullptr;
};

// What one forward left for backward and for the caller to inspect.
struct MoeRouting {
  std::vector<std::int32_t> experts;  // [T, k] chosen experts
  std::vector<float> weights;         // [T, k] combine weights (Llama-4: 1)
  std::vector<float> input_scale;     // [T] Llama-4: sigmoid of the top-1 logit; else 1
  std::vector<std::int64_t> group_sizes;  // [E] rows per expert
  // (token, slot) pairs the expert GEMMs dropped at their capacity (the padded backend with a
  // capacity factor, MaxText's dropping path); their expert output is zero. 0 when dropless.
  std::int64_t dropped_pairs = 0;
};

class MoeLayer {
 public:
  // Plans every ragged dot of the layer for `tokens` tokens (forward and backward).
  static Result<MoeLayer> create(const MoeConfig& config, std::int64_t tokens, const PlanOptions& options = {});

  // y [T, H] from x [T, H]. Keeps the activations backward needs (until the next forward).
  Status forward(const float* x, const MoeParams& params, float* y);
  // The gradients of sum(y * dy) for the last forward's x and params.
  Status backward(const float* x, const MoeParams& params, const float* dy, const MoeGrads& grads);

  const MoeConfig& config() const;
  std::int64_t tokens() const;
  const MoeRouting& routing() const;  // of the last forward
  std::string describe() const;       // one line per planned ragged dot

  MoeLayer(MoeLayer&&) noexcept;
  MoeLayer& operator=(MoeLayer&&) noexcept;
  ~MoeLayer();

 private:
  struct State;
  explicit MoeLayer(std::unique_ptr<State> s);
  // create after the config's checks; may throw std::bad_alloc, which create turns into a Status
  static Result<MoeLayer> create_checked(const MoeConfig& config, std::int64_t tokens, const PlanOptions& options);
  std::unique_ptr<State> s_;
};

}  // namespace ragdot::moe
