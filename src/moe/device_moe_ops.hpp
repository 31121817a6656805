// The MoE layer's kernels on a GPU besides the permutation and the ragged dots: the router of a
// preset and its backward (kernels/ragdot/moe_route.cuh), the gated activation between the expert
// GEMMs and its backward (moe_glu.cuh), and the sum of shared experts' outputs (moe_accumulate.cuh),
// enqueued on the caller's stream. The host versions (moe/router.hpp, moe/gated_activation.hpp) are
// their oracle.
#pragma once

#include <cstdint>
#include <memory>

#include "ragdot/dtype.hpp"
#include "ragdot/moe.hpp"
#include "ragdot/status.hpp"
#include "ragdot/workloads.hpp"

namespace ragdot::moe {

class DeviceMoeOps {
 public:
  // Loads the kernels on GPU `device` for a router of `experts` experts (at most 1024) and a top-k
  // of at most 16.
  static Result<DeviceMoeOps> create(int device, workloads::RouterKind kind, std::int64_t experts, std::int64_t top_k,
                                     double scaling);

  // logits [tokens, experts] f32 (and bias [experts] f32 or null, DeepSeek-V3's selection bias)
  // -> experts [tokens, k] int32, weights [tokens, k] f32, input_scale [tokens] f32. Ties go to
  // the lower expert. `stream` is a CUstream (null: the legacy stream).
  Status route(const float* logits, const float* bias, std::int64_t tokens, void* experts, float* weights,
               float* input_scale, void* stream) const;
  // The gradient of the logits, d_logits [tokens, experts] bf16 (overwritten), from the forward's
  // logits and experts and the gradients of the combine weights d_weights [tokens, k] f32 (and, for
  // Llama-4, of the input scale per pair, d_scale [tokens, k] f32, summed over the token's pairs).
  Status route_backward(const float* logits, const void* experts, const float* d_weights, const float* d_scale,
                        std::int64_t tokens, void* d_logits, void* stream) const;
  // act [rows, ffn] = a(gate) * up for up [rows, 2 ffn] = [gate | up], bf16 or f32, with a the
  // activation's silu or gelu.
  Status glu(GatedActivation a, const void* up, std::int64_t rows, std::int64_t ffn, DType dtype, void* act,
             void* stream) const;
  // d_up [rows, 2 ffn] = [d_gate | d_up] from up [rows, 2 ffn] and d_act [rows, ffn].
  Status glu_backward(GatedActivation a, const void* up, const void* d_act, std::int64_t rows, std::int64_t ffn,
                      DType dtype, void* d_up, void* stream) const;
  // The same backward for sorted rows whose gradient comes before their combine weights: d_act is
  // g [rows, ffn], each row's gradient before its pair's weight (weights [pairs] f32; pair_of
  // [rows] int32, -1 for rows no pair owns, which get zeros). d_up is the backward of
  // weights[pair] * g, and d_weights[pair] = act . g (act as forward stored it), the combine
  // weight's gradient: the combine's backward then needs no expert outputs.
  Status glu_backward_weighted(GatedActivation a, const void* up, const void* g, const int* pair_of,
                               const float* weights, std::int64_t rows, std::int64_t ffn, DType dtype, void* d_up,
                               float* d_weights, void* stream) const;
  // y [count] += x [count], bf16 or f32, summed in f32.
  Status accumulate(void* y, const void* x, std::int64_t count, DType dtype, void* stream) const;

  DeviceMoeOps(DeviceMoeOps&&) noexcept;
  DeviceMoeOps& operator=(DeviceMoeOps&&) noexcept;
  ~DeviceMoeOps();

 private:
  struct State;
  explicit DeviceMoeOps(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace ragdot::moe
