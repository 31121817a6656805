// The GPU padded baseline's copies: rows of a ragged operand scattered into a dense
// [groups, capacity, cols] buffer (padding rows and rows past capacity: zero / dropped), and rows
// of a [groups, capacity, cols] result gathered back into the output (rows no group covers and
// dropped rows: zero). Group sizes are read on the device and clamped as the cuda backend does
// (a negative size counts as 0, the running sum is capped at the ragged extent).
#pragma once

#include "ragdot/padded_params.h"

typedef long long ragdot_padded_i64;

// starts[j] for the local groups j = 0..local_groups, in rows; one thread does the prefix sum.
__device__ void ragdot_padded_starts(const RagdotPaddedParams& p, ragdot_padded_i64* starts) {
  if (threadIdx.x == 0) {
    int offset = p.group_offset ? *p.group_offset : 0;
    if (offset < 0) offset = 0;
    if (offset > p.num_groups - p.local_groups) offset = p.num_groups - p.local_groups;
    ragdot_padded_i64 sum = 0;
    for (int g = 0; g <= offset + p.local_groups && g <= p.num_groups; ++g) {
      if (g >= offset) starts[g - offset] = sum * p.unit;
      if (g == p.num_groups) break;
      ragdot_padded_i64 v = p.gs_is_int64 ? ((const ragdot_padded_i64*)p.group_sizes)[g]
                                          : (ragdot_padded_i64)((const int*)p.group_sizes)[g];
      if (v < 0) v = 0;
      sum = v > p.extent - sum ? p.extent : sum + v;  // sum <= extent: no overflow for any 64-bit v
    }
  }
  __syncthreads();
}

__device__ __forceinline__ void ragdot_padded_copy(const RagdotPaddedParams& p, ragdot_padded_i64 dst_index,
                                                   ragdot_padded_i64 src_index, bool keep) {
  if (p.elem_bytes == 2) {
    ((unsigned short*)p.dst)[dst_index] = keep ? ((const unsigned short*)p.src)[src_index] : (unsigned short)0;
  } else {
    ((unsigned int*)p.dst)[dst_index] = keep ? ((const unsigned int*)p.src)[src_index] : 0u;
  }
}

// grid (ceil(capacity / rows per block), local_groups); dst is dense [local_groups, capacity, cols].
extern "C" __global__ void ragdot_padded_scatter(const RagdotPaddedParams p) {
  extern __shared__ ragdot_padded_i64 ragdot_padded_smem[];
  ragdot_padded_starts(p, ragdot_padded_smem);
  const int j = blockIdx.y;
  const ragdot_padded_i64 first = ragdot_padded_smem[j], size = ragdot_padded_smem[j + 1] - first;
  const ragdot_padded_i64 rows_per_block = (p.capacity + gridDim.x - 1) / gridDim.x;
  const ragdot_padded_i64 r0 = blockIdx.x * rows_per_block;
  for (ragdot_padded_i64 r = r0; r < r0 + rows_per_block && r < p.capacity; ++r) {
    const bool keep = r < size;
    for (ragdot_padded_i64 c = threadIdx.x; c < p.cols; c += blockDim.x) {
      ragdot_padded_copy(p, (j * p.capacity + r) * p.cols + c, keep ? (first + r) * p.src_row + c * p.src_col : 0, keep);
    }
  }
}

// grid (blocks over the output's rows); src is dense [local_groups, capacity, cols].
extern "C" __global__ void ragdot_padded_gather(const RagdotPaddedParams p) {
  extern __shared__ ragdot_padded_i64 ragdot_padded_smem[];
  ragdot_padded_starts(p, ragdot_padded_smem);
  const ragdot_padded_i64* starts = ragdot_padded_smem;
  const ragdot_padded_i64 rows_per_block = (p.rows + gridDim.x - 1) / gridDim.x;
  const ragdot_padded_i64 i0 = blockIdx.x * rows_per_block;
  for (ragdot_padded_i64 i = i0; i < i0 + rows_per_block && i < p.rows; ++i) {
    // the group holding row i: the last j with starts[j] <= i
    int lo = 0, hi = p.local_groups;  // answer in [lo, hi)
    bool covered = p.local_groups > 0 && i >= starts[0] && i < starts[p.local_groups];
    while (covered && hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (starts[mid] <= i) lo = mid; else hi = mid;
    }
    const ragdot_padded_i64 r = covered ? i - starts[lo] : 0;
    const bool keep = covered && r < p.capacity;
    for (ragdot_padded_i64 c = threadIdx.x; c < p.cols; c += blockDim.x) {
      ragdot_padded_copy(p, i * p.dst_row + c * p.dst_col, keep ? (lo * p.capacity + r) * p.cols + c : 0, keep);
    }
  }
}
