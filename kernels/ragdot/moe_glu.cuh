// The gated activation between the MoE layer's two expert ragged dots on the device, and its
// backward: act = a(gate) * up for rows [gate | up] of the fused up projection, in f32, stored as
// the rows' type, with a silu (SwiGLU), gelu (GeGLU) or gelu's tanh approximation; backward
// d_gate = d_act * up * a'(gate), d_up = d_act * a(gate), into [d_gate | d_up] rows. Rows past the
// routed ones are zeros in `up` (the ragged dot guarantees it) and stay zeros. Eight columns per
// thread where the rows allow it; the activation is a template argument, chosen once per launch.
//
//   ragdot_moe_glu            grid-stride over rows x ffn, block 256
//   ragdot_moe_glu_backward   the same
//   ragdot_moe_glu_backward_weighted  one warp per sorted row (grid-stride, block 256): the same
//                       backward from the row's gradient before its combine weight, times that
//                       weight, and the weight's own gradient (act . gradient, a sum over the row),
//                       so that the combine's backward need not read the expert outputs back
#pragma once

#include "ragdot/common.cuh"
#include "ragdot/moe_params.h"
#include "ragdot/moe_rows.cuh"

namespace ragdot {

// a(g), and a(g) with a'(g) from one evaluation (backward needs both). SwiGLU's value is
// common.cuh's silu, the expression the GEMM epilogue that fuses SwiGLU uses too, so that both
// round the same way.
struct GluSilu {
  static __device__ __forceinline__ float value(float g) { return silu(g); }
  static __device__ __forceinline__ void value_and_slope(float g, float& value, float& slope) {
    const float s = 1.0f / (1.0f + __expf(-g));
    value = g * s;
    slope = s * (1.0f + g * (1.0f - s));
  }
};
struct GluGelu {  // g Phi(g); slope Phi(g) + g phi(g)
  static __device__ __forceinline__ float cdf(float g) { return 0.5f * (1.0f + erff(g * 0.70710678118654752f)); }
  static __device__ __forceinline__ float value(float g) { return g * cdf(g); }
  static __device__ __forceinline__ void value_and_slope(float g, float& value, float& slope) {
    const float phi = cdf(g);
    value = g * phi;
    slope = phi + g * 0.39894228040143268f * __expf(-0.5f * g * g);
  }
};
// 0.5 g (1 + tanh(z)), z = c (g + 0.044715 g^3), c = sqrt(2 / pi), written as g s with
// s = 0.5 (1 + tanh z) = sigmoid(2 z): the kernels compile with fast math, under which tanhf is
// tanh.approx (relative error ~2^-11); __expf keeps silu's accuracy, and the sigmoid form has no
// cancellation where the gate is very negative. Slope: s + 2 g s (1 - s) dz/dg.
struct GluGeluTanh {
  static __device__ __forceinline__ float half_one_plus_tanh(float g) {
    return 1.0f / (1.0f + __expf(-2.0f * 0.79788456080286536f * (g + 0.044715f * g * g * g)));
  }
  static __device__ __forceinline__ float value(float g) { return g * half_one_plus_tanh(g); }
  static __device__ __forceinline__ void value_and_slope(float g, float& value, float& slope) {
    const float s = half_one_plus_tanh(g);
    value = g * s;
    slope = s + 2.0f * g * s * (1.0f - s) * 0.79788456080286536f * (1.0f + 3.0f * 0.044715f * g * g);
  }
};

// (row, first column) of the i-th group of `width` columns in rows of `cols` groups.
__device__ __forceinline__ void moe_split(long long i, long long cols, long long& r, long long& c) {
  if (i < 0xffffffffLL && cols < 0xffffffffLL) {  // 32-bit division where it fits
    r = (long long)((unsigned)i / (unsigned)cols);
  } else {
    r = i / cols;
  }
  c = i - r * cols;
}

template <class T, class A>
__device__ __forceinline__ void moe_glu(const RagdotMoeGluParams& p) {
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
      for (int j = 0; j < 8; ++j) g[j] = A::value(g[j]) * u[j];
      moe_store8(act + r * p.ffn + c, g);
    }
    return;
  }
  const long long n = p.rows * p.ffn;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    long long r, c;
    moe_split(i, p.ffn, r, c);
    const float g = to_float(up[r * 2 * p.ffn + c], T()), u = to_float(up[r * 2 * p.ffn + p.ffn + c], T());
    act[i] = from_float(A::value(g) * u, T());
  }
}

// d_gate, d_up of one element from gate, up and d_act.
template <class A>
__device__ __forceinline__ void moe_glu_grad(float g, float u, float da, float& dg, float& du) {
  float value, slope;
  A::value_and_slope(g, value, slope);
  dg = da * u * slope;
  du = da * value;
}

template <class T, class A>
__device__ __forceinline__ void moe_glu_backward(const RagdotMoeGluParams& p) {
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
        moe_glu_grad<A>(g[j], u[j], da[j], dg, du);
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
    moe_glu_grad<A>(to_float(up[r * 2 * p.ffn + c], T()), to_float(up[r * 2 * p.ffn + p.ffn + c], T()),
                    to_float(d_act[i], T()), dg, du);
    d_up[r * 2 * p.ffn + c] = from_float(dg, T());
    d_up[r * 2 * p.ffn + p.ffn + c] = from_float(du, T());
  }
}

// The weighted backward of sorted row r, whose pair is `pair`, by one warp: d_act = w g for the
// row's combine weight w and its unweighted gradient g (p.d_act), and dots[pair] = act . g with act
// rounded to T as the forward stored it (the combine weight's gradient dy . out, since
// out = act W_down and g = dy W_down^T).
template <class T, class A>
__device__ __forceinline__ void moe_glu_backward_weighted_row(const RagdotMoeGluParams& p, long long r, int pair) {
  typedef typename Storage<T>::type S;
  const int lane = threadIdx.x & 31;
  const S* up = (const S*)p.up + r * 2 * p.ffn;
  const S* g_row = (const S*)p.d_act + r * p.ffn;
  S* d_up = (S*)p.d_up + r * 2 * p.ffn;
  const float w = pair >= 0 ? p.weights[pair] : 0.0f;
  float dot = 0.0f;
  if (moe_rows_vectorizable(p.ffn, p.up, p.d_act, p.d_up)) {
    for (long long c = 8 * (long long)lane; c < p.ffn; c += 8 * 32) {
      float g[8], u[8], da[8];
      moe_load8(up + c, g);
      moe_load8(up + p.ffn + c, u);
      moe_load8(g_row + c, da);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float value, slope;
        A::value_and_slope(g[j], value, slope);
        dot += to_float(from_float(value * u[j], T()), T()) * da[j];
        const float d = w * da[j];
        g[j] = d * u[j] * slope;
        u[j] = d * value;
      }
      moe_store8(d_up + c, g);
      moe_store8(d_up + p.ffn + c, u);
    }
  } else {
    for (long long c = lane; c < p.ffn; c += 32) {
      const float gate = to_float(up[c], T()), u = to_float(up[p.ffn + c], T()), da = to_float(g_row[c], T());
      float value, slope;
      A::value_and_slope(gate, value, slope);
      dot += to_float(from_float(value * u, T()), T()) * da;
      const float d = w * da;
      d_up[c] = from_float(d * u * slope, T());
      d_up[p.ffn + c] = from_float(d * value, T());
    }
  }
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, d);
  if (lane == 0 && pair >= 0) p.dots[pair] = dot;
}

template <class T, class A>
__device__ __forceinline__ void moe_glu_backward_weighted(const RagdotMoeGluParams& p) {
  moe_for_each_row_of_warp(p.pair_of, p.rows,
                           [&](long long r, int pair) { moe_glu_backward_weighted_row<T, A>(p, r, pair); });
}

template <bool kBackward, class T, class A>
__device__ __forceinline__ void moe_glu_run(const RagdotMoeGluParams& p) {
  if constexpr (kBackward) {
    moe_glu_backward<T, A>(p);
  } else {
    moe_glu<T, A>(p);
  }
}

// The pass for the params' element type and activation; an unknown activation code writes
// nothing (the host checks it first, so that one is an error there).
template <bool kBackward, class T>
__device__ __forceinline__ void moe_glu_for_activation(const RagdotMoeGluParams& p) {
  if (p.activation == RAGDOT_MOE_GLU_SILU) moe_glu_run<kBackward, T, GluSilu>(p);
  else if (p.activation == RAGDOT_MOE_GLU_GELU) moe_glu_run<kBackward, T, GluGelu>(p);
  else if (p.activation == RAGDOT_MOE_GLU_GELU_TANH) moe_glu_run<kBackward, T, GluGeluTanh>(p);
}
template <bool kBackward>
__device__ __forceinline__ void moe_glu_dispatch(const RagdotMoeGluParams& p) {
  if (p.elem_bytes == 2) {
    moe_glu_for_activation<kBackward, BF16>(p);
  } else {
    moe_glu_for_activation<kBackward, F32>(p);
  }
}

}  // namespace ragdot

extern "C" __global__ void __launch_bounds__(256) ragdot_moe_glu(const RagdotMoeGluParams p) {
  ragdot::moe_glu_dispatch<false>(p);
}

extern "C" __global__ void __launch_bounds__(256) ragdot_moe_glu_backward(const RagdotMoeGluParams p) {
  ragdot::moe_glu_dispatch<true>(p);
}

// (Its own dispatch, activation first: through moe_glu_dispatch, dtype first, ptxas gave this
// kernel 8-16 bytes of stack and spills.)
extern "C" __global__ void __launch_bounds__(256) ragdot_moe_glu_backward_weighted(const RagdotMoeGluParams p) {
  using namespace ragdot;
  const bool bf16 = p.elem_bytes == 2;
  if (p.activation == RAGDOT_MOE_GLU_SILU) {
    bf16 ? moe_glu_backward_weighted<BF16, GluSilu>(p) : moe_glu_backward_weighted<F32, GluSilu>(p);
  } else if (p.activation == RAGDOT_MOE_GLU_GELU) {
    bf16 ? moe_glu_backward_weighted<BF16, GluGelu>(p) : moe_glu_backward_weighted<F32, GluGelu>(p);
  } else if (p.activation == RAGDOT_MOE_GLU_GELU_TANH) {
    bf16 ? moe_glu_backward_weighted<BF16, GluGeluTanh>(p) : moe_glu_backward_weighted<F32, GluGeluTanh>(p);
  }
}
