// Portable tensor-core family (sm_80 and up): cp.async into a multi-stage shared-memory ring,
// ldmatrix (transposing where an operand is not K-major) and mma.sync m16n8k16 with f32
// accumulators, on the persistent tile scheduler. Shared-memory rows are XOR-swizzled in 16-byte
// chunks so that ldmatrix reads are free of bank conflicts for every layout.
//
// The generated prelude defines `struct V` with: kMode, kBM, kBN, kBK, kWarpsM, kWarpsN, kStages,
// kAKMajor, kBKMajor, typedef In (BF16 or F16), typedef Out.
#pragma once

#include "ragdot/schedule.cuh"

namespace ragdot {
namespace mma {

__device__ __forceinline__ void cp_async16(u32 dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;  // 0: fill the 16 bytes with zeros, read nothing
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldmatrix_x4(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}

__device__ __forceinline__ void mma_16816(float* d, const u32* a, const u32* b, BF16) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_16816(float* d, const u32* a, const u32* b, F16) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Byte offset of 16-byte chunk `c` of row `r` in a tile whose rows hold `kChunks` chunks.
template <int kChunks>
__device__ __forceinline__ u32 swizzled(int r, int c) {
  return (u32)(r * kChunks * 16 + ((c ^ (r & 7)) * 16));
}

// Copies one operand tile of one k-step into shared memory. "Rows" are m (for A) or n (for B).
// The tile is stored as lines of 16-byte chunks: K-major, a line per row holding kBK k values
// ([kRows][kBK]); otherwise a line per k holding kRows row values ([kBK][kRows]). Chunks outside
// the valid rows or past k_lim are zero-filled, which also masks the next group's rows in mode 2.
// The operand's unit stride (k when K-major, rows otherwise) is 1 by the variant's layout.
template <int kRows, int kBK, bool kKMajor, int kThreads>
__device__ __forceinline__ void load_tile(u32 dst, const u16* src, i64 row_stride, i64 k_stride, i64 rows_lim,
                                          i64 k0, i64 k_lim) {
  constexpr int kLines = kKMajor ? kRows : kBK, kChunks = (kKMajor ? kBK : kRows) / 8, kTotal = kLines * kChunks;
#pragma unroll
  for (int it = 0; it < (kTotal + kThreads - 1) / kThreads; ++it) {
    const int id = threadIdx.x + it * kThreads;
    if (kTotal % kThreads == 0 || id < kTotal) {
      const int line = id / kChunks, c = id % kChunks;
      const i64 r = kKMajor ? line : c * 8, kk = k0 + (kKMajor ? c * 8 : line);
      const bool valid = r < rows_lim && kk < k_lim;
      const i64 offset = kKMajor ? r * row_stride + kk : kk * k_stride + r;
      cp_async16(dst + swizzled<kChunks>(line, c), valid ? src + offset : src, valid);
    }
  }
}

template <class V>
struct Kernel {
  static constexpr int kThreads = 32 * V::kWarpsM * V::kWarpsN;
  static constexpr int kWarpM = V::kBM / V::kWarpsM, kWarpN = V::kBN / V::kWarpsN;
  static constexpr int kMT = kWarpM / 16, kNT = kWarpN / 8;
  static constexpr int kATileBytes = V::kBM * V::kBK * 2, kBTileBytes = V::kBN * V::kBK * 2;
  static constexpr int kStageBytes = kATileBytes + kBTileBytes;
  static_assert(kNT % 2 == 0, "warp tile n must be a multiple of 16");
  static_assert(V::kBK % 16 == 0 && V::kBM % 64 == 0 && V::kBN % 64 == 0, "tile shape");
  typedef Scheduler<V::kMode, V::kBM, V::kBN, kThreads> Sched;
  typedef typename Storage<typename V::Out>::type O;

  // A fragment of m16 tile `mi` and k16 step `ks` for this lane.
  static __device__ __forceinline__ void load_a(u32 a_tile, int wm0, int mi, int ks, int lane, u32* a) {
    const int q = lane >> 3;
    if (V::kAKMajor) {
      const int r = wm0 + mi * 16 + (lane & 15);
      const int c = ks * 2 + (lane >> 4);
      ldmatrix_x4(a_tile + swizzled<V::kBK / 8>(r, c), a[0], a[1], a[2], a[3]);
    } else {
      const int kr = ks * 16 + (q >> 1) * 8 + (lane & 7);
      const int c = (wm0 + mi * 16) / 8 + (q & 1);
      ldmatrix_x4_trans(a_tile + swizzled<V::kBM / 8>(kr, c), a[0], a[1], a[2], a[3]);
    }
  }
  // B fragments of n8 tiles nj and nj+1.
  static __device__ __forceinline__ void load_b(u32 b_tile, int wn0, int nj, int ks, int lane, u32* b0, u32* b1) {
    const int q = lane >> 3;
    if (V::kBKMajor) {
      const int r = wn0 + nj * 8 + (q >> 1) * 8 + (lane & 7);
      const int c = ks * 2 + (q & 1);
      ldmatrix_x4(b_tile + swizzled<V::kBK / 8>(r, c), b0[0], b0[1], b1[0], b1[1]);
    } else {
      const int kr = ks * 16 + (q & 1) * 8 + (lane & 7);
      const int c = (wn0 + nj * 8) / 8 + (q >> 1);
      ldmatrix_x4_trans(b_tile + swizzled<V::kBN / 8>(kr, c), b0[0], b0[1], b1[0], b1[1]);
    }
  }

  static __device__ __forceinline__ void run(const RagdotKernelParams& p, unsigned char* smem) {
    __shared__ i64 scan_scratch[33];
    const OuterOffsets oo = outer_offsets(p, blockIdx.y);
    Sched sched;
    sched.init(p, oo.gs_row, (int*)smem, scan_scratch);
    const i64 sched_bytes = (Sched::smem_bytes(p.num_groups, p.computed_groups) + 127) / 128 * 128;
    const u32 pipe = smem_address(smem + sched_bytes);

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm0 = (warp % V::kWarpsM) * kWarpM, wn0 = (warp / V::kWarpsM) * kWarpN;
    const u16* lhs = (const u16*)p.lhs + oo.lhs;
    const u16* rhs = (const u16*)p.rhs + oo.rhs;
    O* out = (O*)p.out + oo.out;

    for (i64 t = blockIdx.x; t < sched.total_tiles; t += gridDim.x) {
      const Tile tile = sched.tile(p, t);
      const i64 cols_lim = p.n - tile.n0;
      i64 store_rows = imin((i64)V::kBM, tile.row_end - tile.m0);
      O* otile = out + tile_out_offset<V::kMode>(p, tile);
      if (tile.zero) {
        store_zero_tile<typename V::Out, kThreads, V::kBN>(otile, p.out_m, p.out_n, store_rows, cols_lim);
        continue;
      }
      // operand tile origins
      const u16* a_src = lhs + tile_lhs_offset<V::kMode>(p, tile);
      const u16* b_src = rhs + tile_rhs_offset<V::kMode>(p, tile);
      const i64 a_rows_lim = p.m - tile.m0;  // rows past a group's end are loaded, never stored
      const i64 k_len = tile.k_len;
      const int k_tiles = (int)ceil_div(k_len, V::kBK);

      float acc[kMT][kNT][4];
#pragma unroll
      for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int j = 0; j < kNT; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

      // The ring is free: the previous tile waited for all its copies and synchronized.
#pragma unroll
      for (int s = 0; s < V::kStages - 1; ++s) {
        if (s < k_tiles) load_stage(pipe + s * kStageBytes, a_src, b_src, p, a_rows_lim, cols_lim, s * V::kBK, k_len);
        cp_async_commit();
      }
      for (int kt = 0; kt < k_tiles; ++kt) {
        cp_async_wait<V::kStages - 2>();
        __syncthreads();
        const int next = kt + V::kStages - 1;
        if (next < k_tiles)
          load_stage(pipe + (next % V::kStages) * kStageBytes, a_src, b_src, p, a_rows_lim, cols_lim, next * V::kBK,
                     k_len);
        cp_async_commit();
        const u32 a_tile = pipe + (kt % V::kStages) * kStageBytes, b_tile = a_tile + kATileBytes;
#pragma unroll
        for (int ks = 0; ks < V::kBK / 16; ++ks) {
          u32 af[kMT][4], bf[kNT][2];
#pragma unroll
          for (int i = 0; i < kMT; ++i) load_a(a_tile, wm0, i, ks, lane, af[i]);
#pragma unroll
          for (int j = 0; j < kNT; j += 2) load_b(b_tile, wn0, j, ks, lane, bf[j], bf[j + 1]);
#pragma unroll
          for (int i = 0; i < kMT; ++i)
#pragma unroll
            for (int j = 0; j < kNT; ++j) mma_16816(acc[i][j], af[i], bf[j], typename V::In());
        }
      }
      cp_async_wait<0>();
      __syncthreads();  // every warp is done with the ring before the next tile refills it

      // epilogue: pairs of adjacent columns straight from the accumulators
      const int g = lane >> 2, c2 = (lane & 3) * 2;
#pragma unroll
      for (int i = 0; i < kMT; ++i) {
#pragma unroll
        for (int j = 0; j < kNT; ++j) {
          const int c = wn0 + j * 8 + c2;
          if (c >= cols_lim) continue;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = wm0 + i * 16 + g + h * 8;
            if (r < store_rows) store_pair(otile + r * p.out_m + c, acc[i][j][2 * h], acc[i][j][2 * h + 1], typename V::Out());
          }
        }
      }
    }
  }

  static __device__ __forceinline__ void load_stage(u32 stage, const u16* a_src, const u16* b_src,
                                                    const RagdotKernelParams& p, i64 a_rows_lim, i64 b_cols_lim,
                                                    i64 k0, i64 k_len) {
    load_tile<V::kBM, V::kBK, V::kAKMajor, kThreads>(stage, a_src, p.lhs_m, p.lhs_k, a_rows_lim, k0, k_len);
    load_tile<V::kBN, V::kBK, V::kBKMajor, kThreads>(stage + kATileBytes, b_src, p.rhs_n, p.rhs_k, b_cols_lim, k0,
                                                      k_len);
  }

};

}  // namespace mma
}  // namespace ragdot
