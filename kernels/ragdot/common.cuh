// Device-side basics shared by every kernel family: integer types, element conversions, block
// scans and shared-memory addressing. Self-contained: NVRTC sees no system or CUDA headers.
#pragma once

#include "ragdot/params.h"

namespace ragdot {

typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;

// Element types, named by how they are stored.
struct F32 {};
struct BF16 {};
struct F16 {};

template <class T> struct Storage;
template <> struct Storage<F32> { typedef float type; };
template <> struct Storage<BF16> { typedef u16 type; };
template <> struct Storage<F16> { typedef u16 type; };

__device__ __forceinline__ float to_float(float x, F32) { return x; }
__device__ __forceinline__ float to_float(u16 x, BF16) { return __uint_as_float(u32(x) << 16); }
__device__ __forceinline__ float to_float(u16 x, F16) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x));
  return f;
}

__device__ __forceinline__ float from_float(float x, F32) { return x; }
__device__ __forceinline__ u16 from_float(float x, BF16) {
  u16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
}
__device__ __forceinline__ u16 from_float(float x, F16) {
  u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
}

// Two values into one 32-bit word, lo in the low half (the order mma fragments use).
__device__ __forceinline__ u32 pack2(float lo, float hi, BF16) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ u32 pack2(float lo, float hi, F16) {
  u32 r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// Two adjacent outputs from f32 accumulators in one store: 8 bytes for f32, 4 for 16-bit types.
__device__ __forceinline__ void store_pair(float* dst, float x, float y, F32) { *(float2*)dst = make_float2(x, y); }
template <class T> __device__ __forceinline__ void store_pair(u16* dst, float x, float y, T) {
  *(u32*)dst = pack2(x, y, T());
}

// SwiGLU's gate activation, g sigmoid(g): one expression for every kernel that applies it (the MoE
// layer's gated-activation kernel and the GEMM epilogue that fuses SwiGLU), so that both round the
// same way.
__device__ __forceinline__ float silu(float g) { return g / (1.0f + __expf(-g)); }

__device__ __forceinline__ u32 smem_address(const void* p) {
  u32 a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}

template <class T> __device__ __forceinline__ T imin(T a, T b) { return a < b ? a : b; }
template <class T> __device__ __forceinline__ T imax(T a, T b) { return a > b ? a : b; }
__device__ __forceinline__ i64 ceil_div(i64 a, i64 b) { return (a + b - 1) / b; }

// Exclusive prefix sum of one value per thread over the whole block; `total` gets the sum.
// Every thread of the block must call it. `scratch` holds 33 values in shared memory.
template <int kThreads>
__device__ __forceinline__ i64 block_exclusive_scan(i64 v, i64* scratch, i64& total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  i64 inclusive = v;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const i64 o = __shfl_up_sync(0xffffffffu, inclusive, d);
    if (lane >= d) inclusive += o;
  }
  if (lane == 31) scratch[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    constexpr int kWarps = kThreads / 32;
    i64 w = lane < kWarps ? scratch[lane] : 0;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const i64 o = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w += o;
    }
    if (lane < kWarps) scratch[lane] = w;  // inclusive prefix of warp totals
    if (lane == kWarps - 1) scratch[32] = w;
  }
  __syncthreads();
  const i64 warp_base = warp > 0 ? scratch[warp - 1] : 0;
  total = scratch[32];
  __syncthreads();  // scratch may be reused by the caller's next scan
  return warp_base + inclusive - v;
}

}  // namespace ragdot
