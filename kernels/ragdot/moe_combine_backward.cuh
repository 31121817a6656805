// The backward of the MoE combine (and of the scaled gather), per sorted row: the row's gradient
// is its combine weight times dy of its token, and the weight's gradient is dy of the token dotted
// with the row's expert output, both in one pass over the row (f32 sums). With token_rows = x and
// sorted_rows = the input-row gradients, the same dot is the gradient of Llama-4's input scale.
//
//   ragdot_moe_combine_backward        grid-stride over the sorted rows, one block (256) per row
//   ragdot_moe_combine_backward_warps  the same with one warp per row (~4 rows per warp, the next
//                                      row's pair loaded during this one's), a lane's loads of a
//                                      row in flight together and the dot summed by shuffles
#pragma once

#include "ragdot/common.cuh"
#include "ragdot/moe_params.h"
#include "ragdot/moe_rows.cuh"

namespace ragdot {

// The threads that take one sorted row: a whole block (rank threadIdx.x) or one warp (its lane),
// how many 8-element pieces each has in flight per operand, and how their partial dots add up.
struct MoeRowBlock {
  static constexpr int kUnroll = 1;
  float* scratch;  // 32 floats of shared memory
  __device__ int rank() const { return threadIdx.x; }
  __device__ int size() const { return blockDim.x; }
  __device__ float sum(float v) const { return moe_block_sum(v, scratch); }
};
struct MoeRowWarp {
  static constexpr int kUnroll = 4;
  __device__ int rank() const { return threadIdx.x & 31; }
  __device__ int size() const { return 32; }
  __device__ float sum(float v) const {
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
    return v;
  }
};

// Sorted row r, of pair `pair`, by the threads of `g`.
template <class T, class Group>
__device__ __forceinline__ void moe_combine_backward_row(const RagdotMoeRowGradParams& p, long long r, int pair,
                                                         const Group& g) {
  typedef typename Storage<T>::type S;
  constexpr int kUnroll = Group::kUnroll;
  const int rank = g.rank(), size = g.size();
  S* scaled = p.scaled ? (S*)p.scaled + r * p.hidden : (S*)0;
  if (pair < 0) {  // a row no pair owns: zero gradient, no dot (the same branch for the whole group)
    if (scaled)
      for (long long c = rank; c < p.hidden; c += size) scaled[c] = from_float(0.0f, T());
    return;
  }
  const S* a = (const S*)p.token_rows + (long long)(pair / p.top_k) * p.hidden;
  const S* b = p.dots ? (const S*)p.sorted_rows + r * p.hidden : (const S*)0;
  const float w = scaled ? p.weights[pair] : 0.0f;
  float dot = 0.0f;
  if (moe_rows_vectorizable(p.hidden, a, scaled, b)) {
    const long long step = 8 * (long long)size;
    for (long long c0 = 8 * (long long)rank; c0 < p.hidden; c0 += step * kUnroll) {
      float va[kUnroll][8], vb[kUnroll][8];
#pragma unroll
      for (int q = 0; q < kUnroll; ++q) {
        const long long c = c0 + step * q;
        if (c >= p.hidden) continue;
        moe_load8(a + c, va[q]);
        if (b) moe_load8(b + c, vb[q]);
      }
#pragma unroll
      for (int q = 0; q < kUnroll; ++q) {
        const long long c = c0 + step * q;
        if (c >= p.hidden) continue;
        if (b) {
#pragma unroll
          for (int i = 0; i < 8; ++i) dot += va[q][i] * vb[q][i];
        }
        if (scaled) {
#pragma unroll
          for (int i = 0; i < 8; ++i) va[q][i] *= w;
          moe_store8(scaled + c, va[q]);
        }
      }
    }
  } else {
    for (long long c = rank; c < p.hidden; c += size) {
      const float av = to_float(a[c], T());
      if (b) dot += av * to_float(b[c], T());
      if (scaled) scaled[c] = from_float(w * av, T());
    }
  }
  if (p.dots) {
    dot = g.sum(dot);
    if (rank == 0) p.dots[pair] = dot;
  }
}

template <class Group>
__device__ __forceinline__ void moe_combine_backward_any(const RagdotMoeRowGradParams& p, long long r, int pair,
                                                         const Group& g) {
  if (p.elem_bytes == 2) {
    moe_combine_backward_row<BF16>(p, r, pair, g);
  } else {
    moe_combine_backward_row<F32>(p, r, pair, g);
  }
}

}  // namespace ragdot

extern "C" __global__ void __launch_bounds__(256) ragdot_moe_combine_backward(const RagdotMoeRowGradParams p) {
  __shared__ float scratch[32];
  const ragdot::MoeRowBlock block{scratch};
  for (long long r = blockIdx.x; r < p.rows; r += gridDim.x) ragdot::moe_combine_backward_any(p, r, p.pair_of[r], block);
}

// grid: warps over the sorted rows (grid-stride), block 256
extern "C" __global__ void __launch_bounds__(256) ragdot_moe_combine_backward_warps(const RagdotMoeRowGradParams p) {
  ragdot::moe_for_each_row_of_warp(p.pair_of, p.rows, [&](long long r, int pair) {
    ragdot::moe_combine_backward_any(p, r, pair, ragdot::MoeRowWarp{});
  });
}
