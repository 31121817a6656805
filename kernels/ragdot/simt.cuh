// Generic family: plain FMA on CUDA cores for what the tensor-core families do not take: f32
// inputs (exact f32 products, no TF32 rounding), mixed input dtypes, and strides that are not
// 16-byte friendly. Any element strides; every element load is bounds-checked.
//
// The generated prelude defines `struct V` with: kMode, kBM, kBN, kBK, kTM, kTN (outputs per
// thread), typedefs Lhs, Rhs, Out. Loads are ordered along whichever dim is contiguous in memory
// (read from the strides at run time: the branch is uniform), so that a warp's loads coalesce.
#pragma once

#include "ragdot/schedule.cuh"

namespace ragdot {
namespace simt {

template <class V>
struct Kernel {
  static constexpr int kThreadsM = V::kBM / V::kTM, kThreadsN = V::kBN / V::kTN;
  static constexpr int kThreads = kThreadsM * kThreadsN;
  typedef Scheduler<V::kMode, V::kBM, V::kBN, kThreads> Sched;
  typedef typename Storage<typename V::Lhs>::type L;
  typedef typename Storage<typename V::Rhs>::type R;
  typedef typename Storage<typename V::Out>::type O;

  static __device__ __forceinline__ void run(const RagdotKernelParams& p, unsigned char* smem) {
    __shared__ i64 scan_scratch[33];
    __shared__ float as[V::kBK][V::kBM + 4];
    __shared__ float bs[V::kBK][V::kBN + 4];
    const OuterOffsets oo = outer_offsets(p, blockIdx.y);
    Sched sched;
    sched.init(p, oo.gs_row, (int*)smem, scan_scratch);

    const L* lhs = (const L*)p.lhs + oo.lhs;
    const R* rhs = (const R*)p.rhs + oo.rhs;
    O* out = (O*)p.out + oo.out;
    const int tm = threadIdx.x % kThreadsM, tn = threadIdx.x / kThreadsM;
    const bool a_k_fast = p.lhs_k == 1, b_k_fast = p.rhs_k == 1;

    for (i64 t = blockIdx.x; t < sched.total_tiles; t += gridDim.x) {
      const Tile tile = sched.tile(p, t);
      const i64 cols_lim = p.n - tile.n0;
      const i64 store_rows = imin((i64)V::kBM, tile.row_end - tile.m0);
      O* otile = out + tile_out_offset<V::kMode>(p, tile);
      if (tile.zero) {
        store_zero_tile<typename V::Out, kThreads, V::kBN>(otile, p.out_m, p.out_n, store_rows, cols_lim);
        continue;
      }
      const L* a_src = lhs + tile_lhs_offset<V::kMode>(p, tile);
      const R* b_src = rhs + tile_rhs_offset<V::kMode>(p, tile);
      const i64 a_rows_lim = p.m - tile.m0;

      float acc[V::kTM][V::kTN];
#pragma unroll
      for (int i = 0; i < V::kTM; ++i)
#pragma unroll
        for (int j = 0; j < V::kTN; ++j) acc[i][j] = 0.0f;

      for (i64 k0 = 0; k0 < tile.k_len; k0 += V::kBK) {
        for (int id = threadIdx.x; id < V::kBM * V::kBK; id += kThreads) {
          const int r = a_k_fast ? id / V::kBK : id % V::kBM;
          const int kk = a_k_fast ? id % V::kBK : id / V::kBM;
          const bool valid = r < a_rows_lim && k0 + kk < tile.k_len;
          as[kk][r] = valid ? to_float(a_src[r * p.lhs_m + (k0 + kk) * p.lhs_k], typename V::Lhs()) : 0.0f;
        }
        for (int id = threadIdx.x; id < V::kBN * V::kBK; id += kThreads) {
          const int c = b_k_fast ? id / V::kBK : id % V::kBN;
          const int kk = b_k_fast ? id % V::kBK : id / V::kBN;
          const bool valid = c < cols_lim && k0 + kk < tile.k_len;
          bs[kk][c] = valid ? to_float(b_src[c * p.rhs_n + (k0 + kk) * p.rhs_k], typename V::Rhs()) : 0.0f;
        }
        __syncthreads();
#pragma unroll 4
        for (int kk = 0; kk < V::kBK; ++kk) {
          float a[V::kTM], b[V::kTN];
#pragma unroll
          for (int i = 0; i < V::kTM; ++i) a[i] = as[kk][tm + i * kThreadsM];
#pragma unroll
          for (int j = 0; j < V::kTN; ++j) b[j] = bs[kk][tn + j * kThreadsN];
#pragma unroll
          for (int i = 0; i < V::kTM; ++i)
#pragma unroll
            for (int j = 0; j < V::kTN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
      }
#pragma unroll
      for (int i = 0; i < V::kTM; ++i) {
        const int r = tm + i * kThreadsM;
        if (r >= store_rows) continue;
#pragma unroll
        for (int j = 0; j < V::kTN; ++j) {
          const int c = tn + j * kThreadsN;
          if (c < cols_lim) otile[r * p.out_m + c * p.out_n] = from_float(acc[i][j], typename V::Out());
        }
      }
    }
  }
};

}  // namespace simt
}  // namespace ragdot
