// The backward of the MoE combine (and of the scaled gather), per sorted row: the row's gradient
// is its combine weight times dy of its token, and the weight's gradient is dy of the token dotted
// with the row's expert output, both in one pass over the row (f32 sums). With token_rows = x and
// sorted_rows = the input-row gradients, the same dot is the gradient of Llama-4's input scale.
//
//   ragdot_moe_combine_backward   grid-stride over the sorted rows, one block (256) per row
#pragma once

#include "ragdot/common.cuh"
#include "ragdot/moe_params.h"
#include "ragdot/moe_rows.cuh"

namespace ragdot {

template <class T>
__device__ __forceinline__ void moe_combine_backward_row(const RagdotMoeRowGradParams& p, long long r,
                                                         float* scratch) {
  typedef typename Storage<T>::type S;
  const int pair = p.pair_of[r];
  S* scaled = p.scaled ? (S*)p.scaled + r * p.hidden : (S*)0;
  if (pair < 0) {  // a row no pair owns: zero gradient, no dot (block-uniform branch)
    if (scaled)
      for (long long c = threadIdx.x; c < p.hidden; c += blockDim.x) scaled[c] = from_float(0.0f, T());
    return;
  }
  const S* a = (const S*)p.token_rows + (long long)(pair / p.top_k) * p.hidden;
  const S* b = p.dots ? (const S*)p.sorted_rows + r * p.hidden : (const S*)0;
  const float w = scaled ? p.weights[pair] : 0.0f;
  float dot = 0.0f;
  if (moe_rows_vectorizable(p.hidden, a, scaled, b)) {
    for (long long c = 8 * (long long)threadIdx.x; c < p.hidden; c += 8 * (long long)blockDim.x) {
      float va[8], vb[8];
      moe_load8(a + c, va);
      if (b) {
        moe_load8(b + c, vb);
#pragma unroll
        for (int i = 0; i < 8; ++i) dot += va[i] * vb[i];
      }
      if (scaled) {
#pragma unroll
        for (int i = 0; i < 8; ++i) va[i] *= w;
        moe_store8(scaled + c, va);
      }
    }
  } else {
    for (long long c = threadIdx.x; c < p.hidden; c += blockDim.x) {
      const float av = to_float(a[c], T());
      if (b) dot += av * to_float(b[c], T());
      if (scaled) scaled[c] = from_float(w * av, T());
    }
  }
  if (p.dots) {
    dot = moe_block_sum(dot, scratch);
    if (threadIdx.x == 0) p.dots[pair] = dot;
  }
}

}  // namespace ragdot

extern "C" __global__ void __launch_bounds__(256) ragdot_moe_combine_backward(const RagdotMoeRowGradParams p) {
  __shared__ float scratch[32];
  for (long long r = blockIdx.x; r < p.rows; r += gridDim.x) {
    if (p.elem_bytes == 2) {
      ragdot::moe_combine_backward_row<ragdot::BF16>(p, r, scratch);
    } else {
      ragdot::moe_combine_backward_row<ragdot::F32>(p, r, scratch);
    }
  }
}
