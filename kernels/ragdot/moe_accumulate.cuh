// y += x elementwise in f32, stored as y's type: the MoE layer sums the outputs (and the input
// gradients) of several shared experts with it, since a ragged dot writes its output rather than
// adding to it. Eight elements per thread where the buffers allow it.
//
//   ragdot_moe_accumulate   grid-stride over the elements, block 256
#pragma once

#include "ragdot/common.cuh"
#include "ragdot/moe_params.h"
#include "ragdot/moe_rows.cuh"

namespace ragdot {

template <class T>
__device__ __forceinline__ void moe_accumulate(const RagdotMoeAccumulateParams& p) {
  typedef typename Storage<T>::type S;
  S* y = (S*)p.y;
  const S* x = (const S*)p.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (moe_rows_vectorizable(p.count, p.y, p.x, 0)) {
    for (; i < p.count / 8; i += stride) {
      float a[8], b[8];
      moe_load8(y + 8 * i, a);
      moe_load8(x + 8 * i, b);
#pragma unroll
      for (int j = 0; j < 8; ++j) a[j] += b[j];
      moe_store8(y + 8 * i, a);
    }
    return;
  }
  for (; i < p.count; i += stride) y[i] = from_float(to_float(y[i], T()) + to_float(x[i], T()), T());
}

}  // namespace ragdot

extern "C" __global__ void __launch_bounds__(256) ragdot_moe_accumulate(const RagdotMoeAccumulateParams p) {
  if (p.elem_bytes == 2) {
    ragdot::moe_accumulate<ragdot::BF16>(p);
  } else {
    ragdot::moe_accumulate<ragdot::F32>(p);
  }
}
