// SwiGLU between the MoE layer's two expert ragged dots on the device, and its backward:
// act = silu(gate) * up for rows [gate | up] of the fused up projection, in f32, stored as the rows'
// type; backward d_gate = d_act * up * s * (1 + gate * (1 - s)) with s = sigmoid(gate), d_up =
// d_act * silu(gate), into [d_gate | d_up] rows. Rows past the routed ones are zeros in `up` (the
// ragged dot guarantees it) and stay zeros. Eight columns per thread where the rows allow it.
//
//   ragdot_moe_swiglu            grid-stride over rows x ffn, block 256
//   ragdot_moe_swiglu_backward   the same
#pragma once

#include "ragdot/common.cuh"
#include "ragdot/moe_params.h"
#include "ragdot/moe_rows.cuh"

namespace ragdot {

// (row, first column) of the i-th group of `width` columns in rows of `cols` groups.
__device__ __forceinline__ void moe_split(long long i, long long cols, long long& r, long long& c) {
  if (i < 0xffffffffLL && cols < 0xffffffffLL) {  // 32-bit division where it fits
    r = (long long)((unsigned)i / (unsigned)cols);
  } else {
    r = i / cols;
  }
  c = i - r * cols;
}

template <class T>
__device__ __forceinline__ void moe_swiglu(const RagdotMoeSwigluParams& p) {
  typedef typename Storage<T>::type S;
  const S* up = (const S*)p.up;
  S* act = (S*)p.act;
  const long long stride = (long long)gridDim.x * blockDim.x;
  if (moe_rows_vectorizable(p.ffn, p.up, p.act, 0)) {
    const long long groups = p.ffn / 8, n = p.rows * groups;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
      long long r, c;
      moe_split(i, groups, r, c);
      c *= 8;
      float g[8], u[8];
      moe_load8(up + r * 2 * p.ffn + c, g);
      moe_load8(up + r * 2 * p.ffn + p.ffn + c, u);
#pragma unroll
      for (int j = 0; j < 8; ++j) g[j] = silu(g[j]) * u[j];
      moe_store8(act + r * p.ffn + c, g);
    }
    return;
  }
  const long long n = p.rows * p.ffn;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    long long r, c;
    moe_split(i, p.ffn, r, c);
    const float g = to_float(up[r * 2 * p.ffn + c], T()), u = to_float(up[r * 2 * p.ffn + p.ffn + c], T());
    act[i] = from_float(silu(g) * u, T());
  }
}

// d_gate, d_up of one element from gate, up and d_act.
__device__ __forceinline__ void moe_swiglu_grad(float g, float u, float da, float& dg, float& du) {
  const float s = 1.0f / (1.0f + __expf(-g));
  dg = da * u * s * (1.0f + g * (1.0f - s));
  du = da * g * s;
}

template <class T>
__device__ __forceinline__ void moe_swiglu_backward(const RagdotMoeSwigluParams& p) {
  typedef typename Storage<T>::type S;
  const S* up = (const S*)p.up;
  const S* d_act = (const S*)p.d_act;
  S* d_up = (S*)p.d_up;
  const long long stride = (long long)gridDim.x * blockDim.x;
  if (moe_rows_vectorizable(p.ffn, p.up, p.d_act, p.d_up)) {
    const long long groups = p.ffn / 8, n = p.rows * groups;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
      long long r, c;
      moe_split(i, groups, r, c);
      c *= 8;
      float g[8], u[8], da[8];
      moe_load8(up + r * 2 * p.ffn + c, g);
      moe_load8(up + r * 2 * p.ffn + p.ffn + c, u);
      moe_load8(d_act + r * p.ffn + c, da);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float dg, du;
        moe_swiglu_grad(g[j], u[j], da[j], dg, du);
        g[j] = dg;
        u[j] = du;
      }
      moe_store8(d_up + r * 2 * p.ffn + c, g);
      moe_store8(d_up + r * 2 * p.ffn + p.ffn + c, u);
    }
    return;
  }
  const long long n = p.rows * p.ffn;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    long long r, c;
    moe_split(i, p.ffn, r, c);
    float dg, du;
    moe_swiglu_grad(to_float(up[r * 2 * p.ffn + c], T()), to_float(up[r * 2 * p.ffn + p.ffn + c], T()),
                    to_float(d_act[i], T()), dg, du);
    d_up[r * 2 * p.ffn + c] = from_float(dg, T());
    d_up[r * 2 * p.ffn + p.ffn + c] = from_float(du, T());
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

extern "C" __global__ void __launch_bounds__(256) ragdot_moe_swiglu_backward(const RagdotMoeSwigluParams p) {
  if (p.elem_bytes == 2) {
    ragdot::moe_swiglu_backward<ragdot::BF16>(p);
  } else {
    ragdot::moe_swiglu_backward<ragdot::F32>(p);
  }
}
