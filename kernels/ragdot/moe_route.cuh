// The MoE routers on the device, one warp per token: top-k of the token's scores by k rounds of
// a warp argmax over the scores in shared memory (ties go to the lower expert, as on the host),
// then the combine weights. The kinds are those of the presets (moe/router.cpp is the host
// oracle): softmax over the top-k logits (Mixtral; Qwen3's renormalized top-k is the same),
// DeepSeek-V3 (select by sigmoid + bias, weigh by the unbiased sigmoids, renormalized, scaled),
// Llama-4 (top-k of the logits, weight 1, the sigmoid of the top logit scales the input).
//
//   ragdot_moe_route            grid ceil(tokens / RAGDOT_MOE_ROUTE_WARPS), block 32 * RAGDOT_MOE_ROUTE_WARPS
//   ragdot_moe_route_backward   the same grid: the gradient of the logits (below)
#pragma once

#include "ragdot/common.cuh"
#include "ragdot/moe_params.h"

namespace ragdot {

__device__ __forceinline__ float moe_sigmoid(float z) { return 1.0f / (1.0f + __expf(-z)); }
// The logit of chosen expert e; -inf where no expert was chosen (weight 0).
__device__ __forceinline__ float moe_logit(const float* z, int e) { return e >= 0 ? z[e] : -__int_as_float(0x7f800000); }

// (score, index) of the larger; equal scores: the lower index.
__device__ __forceinline__ void moe_better(float& s, int& i, float s2, int i2) {
  if (s2 > s || (s2 == s && i2 >= 0 && (i < 0 || i2 < i))) {
    s = s2;
    i = i2;
  }
}

}  // namespace ragdot

extern "C" __global__ void __launch_bounds__(32 * RAGDOT_MOE_ROUTE_WARPS) ragdot_moe_route(const RagdotMoeRouteParams p) {
  __shared__ float scores[RAGDOT_MOE_ROUTE_WARPS][RAGDOT_MOE_MAX_EXPERTS];
  __shared__ int picks[RAGDOT_MOE_ROUTE_WARPS][RAGDOT_MOE_MAX_TOP_K];  // in shared memory, not a local array
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long t = (long long)blockIdx.x * RAGDOT_MOE_ROUTE_WARPS + warp;
  if (t >= p.tokens) return;  // whole warps leave: no block-wide barrier below
  const float* z = p.logits + t * p.num_experts;
  float* s = scores[warp];
  const bool deepseek = p.kind == RAGDOT_MOE_ROUTER_DEEPSEEK_V3;
  for (int e = lane; e < p.num_experts; e += 32) {
    s[e] = deepseek ? ragdot::moe_sigmoid(z[e]) + (p.bias ? p.bias[e] : 0.0f) : z[e];
  }
  __syncwarp();
  int* chosen = picks[warp];
  // Taken experts are marked NaN, which never wins moe_better; the search starts at -inf, so
  // experts whose logit is -inf (masked) are still taken, lowest index first, as on the host.
  for (int j = 0; j < p.top_k; ++j) {
    float best = -__int_as_float(0x7f800000);
    int at = -1;
    for (int e = lane; e < p.num_experts; e += 32) ragdot::moe_better(best, at, s[e], e);
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) {
      const float b2 = __shfl_xor_sync(0xffffffffu, best, d);
      const int a2 = __shfl_xor_sync(0xffffffffu, at, d);
      ragdot::moe_better(best, at, b2, a2);
    }
    if (lane == 0) {  // `at` is the same on every lane
      chosen[j] = at;
      if (at >= 0) s[at] = __int_as_float(0x7fffffff);  // NaN: out of the next rounds
    }
    __syncwarp();
  }
  if (lane != 0) return;
  int* experts = p.experts + t * p.top_k;
  float* weights = p.weights + t * p.top_k;
  float scale = 1.0f;
  if (chosen[0] < 0) {  // no expert had a comparable score (all NaN): no routing, no weight
    for (int j = 0; j < p.top_k; ++j) weights[j] = 0.0f;
  } else if (p.kind == RAGDOT_MOE_ROUTER_LLAMA4) {
    for (int j = 0; j < p.top_k; ++j) weights[j] = p.scaling;
    scale = ragdot::moe_sigmoid(z[chosen[0]]);
  } else if (deepseek) {
    float sum = 0.0f;
    for (int j = 0; j < p.top_k; ++j) sum += ragdot::moe_sigmoid(ragdot::moe_logit(z, chosen[j]));
    for (int j = 0; j < p.top_k; ++j) weights[j] = p.scaling * ragdot::moe_sigmoid(ragdot::moe_logit(z, chosen[j])) / sum;
  } else {
    const float top = z[chosen[0]];
    float sum = 0.0f;
    for (int j = 0; j < p.top_k; ++j) sum += __expf(ragdot::moe_logit(z, chosen[j]) - top);
    for (int j = 0; j < p.top_k; ++j) weights[j] = p.scaling * __expf(ragdot::moe_logit(z, chosen[j]) - top) / sum;
  }
  for (int j = 0; j < p.top_k; ++j) experts[j] = chosen[j];
  p.input_scale[t] = scale;
}

// The router's backward, one warp per token: the gradient of the logits from the gradients of the
// combine weights (and of Llama-4's input scale), as moe/router.cpp's route_token_backward:
//   softmax kinds: w_j = c p_j, p = softmax of the chosen logits: dz_j = c p_j (dw_j - sum_i p_i dw_i)
//   DeepSeek-V3:   w_j = c s_j / S, s = sigmoid: dz_j = c (dw_j - sum_i dw_i s_i / S) / S * s_j (1 - s_j)
//   Llama-4:       the input scale is sigmoid(z_top): dz_top = d_scale s (1 - s)
// Logits no pair chose get 0. d_logits is bf16: it feeds the router's two tensor-core products.
//
//   ragdot_moe_route_backward   grid ceil(tokens / RAGDOT_MOE_ROUTE_WARPS), block 32 * RAGDOT_MOE_ROUTE_WARPS
extern "C" __global__ void __launch_bounds__(32 * RAGDOT_MOE_ROUTE_WARPS)
    ragdot_moe_route_backward(const RagdotMoeRouteParams p) {
  __shared__ int picks[RAGDOT_MOE_ROUTE_WARPS][RAGDOT_MOE_MAX_TOP_K];
  __shared__ float grads[RAGDOT_MOE_ROUTE_WARPS][RAGDOT_MOE_MAX_TOP_K];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long t = (long long)blockIdx.x * RAGDOT_MOE_ROUTE_WARPS + warp;
  if (t >= p.tokens) return;  // whole warps leave: no block-wide barrier below
  const float* z = p.logits + t * p.num_experts;
  const bool mine = lane < p.top_k;
  const int e = mine ? p.experts[t * p.top_k + lane] : -1;
  const bool valid = e >= 0 && e < p.num_experts;
  const float zj = valid ? z[e] : 0.0f;
  // a pair with no expert has no row, so nothing wrote its weight's gradient: read it as 0
  const float dw = mine && valid ? p.d_weights[t * p.top_k + lane] : 0.0f;
  float g = 0.0f;
  if (p.kind == RAGDOT_MOE_ROUTER_LLAMA4) {
    float ds = mine && p.d_scale ? p.d_scale[t * p.top_k + lane] : 0.0f;
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) ds += __shfl_xor_sync(0xffffffffu, ds, d);
    const float s = ragdot::moe_sigmoid(zj);
    g = lane == 0 && valid ? ds * s * (1.0f - s) : 0.0f;
  } else if (p.kind == RAGDOT_MOE_ROUTER_DEEPSEEK_V3) {
    const float s = valid ? ragdot::moe_sigmoid(zj) : 0.0f;
    float sum = s, dot = dw * s;
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) {
      sum += __shfl_xor_sync(0xffffffffu, sum, d);
      dot += __shfl_xor_sync(0xffffffffu, dot, d);
    }
    g = valid && sum > 0.0f ? p.scaling * (dw - dot / sum) / sum * s * (1.0f - s) : 0.0f;
  } else {
    const float top = __shfl_sync(0xffffffffu, zj, 0);
    float q = valid ? __expf(zj - top) : 0.0f;
    float sum = q;
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, d);
    q = sum > 0.0f ? q / sum : 0.0f;
    float dot = q * dw;
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, d);
    g = valid ? p.scaling * q * (dw - dot) : 0.0f;
  }
  if (mine) {
    picks[warp][lane] = valid ? e : -1;
    grads[warp][lane] = g;
  }
  __syncwarp();
  ragdot::u16* out = (ragdot::u16*)p.d_logits + t * p.num_experts;
  for (int x = lane; x < p.num_experts; x += 32) {
    float v = 0.0f;
    for (int j = 0; j < p.top_k; ++j) {
      if (picks[warp][j] == x) v += grads[warp][j];
    }
    out[x] = ragdot::from_float(v, ragdot::BF16());
  }
}
