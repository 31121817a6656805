// Row access shared by the MoE layer's memory-bound kernels: eight elements of a bf16 or f32 row
// as f32 in one 16-byte (bf16) or two 16-byte (f32) accesses, so that a warp moves whole cache
// lines per instruction, and a block-wide sum. The 8-wide path needs rows whose element count is
// a multiple of 8 and 16-byte aligned bases (moe_rows_vectorizable); other rows go element by
// element.
#pragma once

#include "ragdot/common.cuh"

namespace ragdot {

__device__ __forceinline__ void moe_load8(const u16* p, float* v) {
  const uint4 q = *(const uint4*)p;
  const u32 w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[2 * i] = __uint_as_float(w[i] << 16);
    v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}
__device__ __forceinline__ void moe_load8(const float* p, float* v) {
  const float4 a = ((const float4*)p)[0], b = ((const float4*)p)[1];
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

// `streaming`: evict-first stores, for rows that will not fit in L2 beside what is read
__device__ __forceinline__ void moe_store8(u16* p, const float* v, bool streaming = false) {
  uint4 q;
  q.x = pack2(v[0], v[1], BF16());
  q.y = pack2(v[2], v[3], BF16());
  q.z = pack2(v[4], v[5], BF16());
  q.w = pack2(v[6], v[7], BF16());
  if (streaming) __stcs((uint4*)p, q);
  else *(uint4*)p = q;
}
__device__ __forceinline__ void moe_store8(float* p, const float* v, bool streaming = false) {
  const float4 a = make_float4(v[0], v[1], v[2], v[3]), b = make_float4(v[4], v[5], v[6], v[7]);
  if (streaming) {
    __stcs((float4*)p, a);
    __stcs((float4*)p + 1, b);
  } else {
    ((float4*)p)[0] = a;
    ((float4*)p)[1] = b;
  }
}

// Whether rows of `n` elements at these bases can be read and written 8 at a time.
__device__ __forceinline__ bool moe_rows_vectorizable(long long n, const void* a, const void* b, const void* c) {
  const unsigned long long bits = (unsigned long long)a | (unsigned long long)b | (unsigned long long)c;
  return n % 8 == 0 && bits % 16 == 0;
}

// Sum of one value per thread over the block (blockDim.x a multiple of 32, at most 1024); every
// thread gets it. `scratch` holds 32 floats in shared memory. Every thread must call it.
__device__ __forceinline__ float moe_block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float s = lane < warps ? scratch[lane] : 0.0f;
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) s += __shfl_xor_sync(0xffffffffu, s, d);
  return s;
}

// Calls row(r, pair_of[r]) for the sorted rows r < rows this warp takes (grid-stride over all
// warps of the grid), loading the next row's pair before it works on the current one, so that
// the pair's round trip overlaps the row's.
template <class Row>
__device__ __forceinline__ void moe_for_each_row_of_warp(const int* pair_of, long long rows, Row row) {
  const long long warps = (long long)gridDim.x * (blockDim.x >> 5);
  long long r = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  int pair = r < rows ? pair_of[r] : -1;
  for (; r < rows; r += warps) {
    const long long next = r + warps;
    const int next_pair = next < rows ? pair_of[next] : -1;
    row(r, pair);
    pair = next_pair;
  }
}

}  // namespace ragdot
