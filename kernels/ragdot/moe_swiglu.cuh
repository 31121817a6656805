// SwiGLU between the MoE layer's two expert ragged dots on the device: act = silu(gate) * up for
// rows [gate | up] of the fused up projection, in f32, stored as the rows' type. Rows past the
// routed ones are zeros in `up` (the ragged dot guarantees it) and stay zeros in `act`.
//
//   ragdot_moe_swiglu   grid-stride over rows x ffn, block 256
#pragma once

#include "ragdot/common.cuh"
#include "ragdot/moe_params.h"

namespace ragdot {

template <class T>
__device__ __forceinline__ void moe_swiglu(const RagdotMoeSwigluParams& p) {
  typedef typename Storage<T>::type S;
  const S* up = (const S*)p.up;
  S* act = (S*)p.act;
  const long long n = p.rows * p.ffn;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const long long r = i / p.ffn, c = i - r * p.ffn;
    const float g = to_float(up[r * 2 * p.ffn + c], T()), u = to_float(up[r * 2 * p.ffn + p.ffn + c], T());
    act[i] = from_float(g / (1.0f + __expf(-g)) * u, T());
  }
}

}  // namespace ragdot

extern "C" __global__ void __launch_bounds__(256) ragdot_moe_swiglu(const RagdotMoeSwigluParams p) {
  if (p.elem_bytes == 2) {
    ragdot::moe_swiglu<ragdot::BF16>(p);
  } else {
    ragdot::moe_swiglu<ragdot::F32>(p);
  }
}
