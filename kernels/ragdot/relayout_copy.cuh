// The cuda backend's relayout copy: dst (dense, last dim fastest) = src read through arbitrary
// element strides. Used for the operands whose dims canonicalization cannot express as strides
// of one GEMM (e.g. contracting dims in a different order on the two sides); one pass, each
// thread a few elements in a grid-stride loop, writes coalesced.
#pragma once

#include "ragdot/relayout_params.h"

template <class T>
__device__ void ragdot_relayout_elements(const RagdotRelayoutParams& p) {
  const T* src = static_cast<const T*>(p.src);
  T* dst = static_cast<T*>(p.dst);
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.elements; i += step) {
    long long rem = i, off = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      const long long size = p.sizes[d];
      off += (rem % size) * p.src_strides[d];
      rem /= size;
    }
    dst[i] = src[off];
  }
}

extern "C" __global__ void ragdot_relayout_copy(const RagdotRelayoutParams p) {
  switch (p.elem_bytes) {
    case 1: ragdot_relayout_elements<unsigned char>(p); break;
    case 2: ragdot_relayout_elements<unsigned short>(p); break;
    case 4: ragdot_relayout_elements<unsigned int>(p); break;
    default: ragdot_relayout_elements<unsigned long long>(p); break;
  }
}
