// The MoE layer's permutation on the device: a stable counting sort of the (token, slot) pairs by
// expert in three small kernels (count per chunk, offsets, scatter) and no memsets, with no host sync: the group
// sizes the expert ragged dots read come out of it on the device. Then the gather of the sorted
// rows and the weighted combine of the expert outputs back into token order, accumulated in f32.
//
//   ragdot_moe_count    grid num_chunks, block 32: per-chunk histogram (shared-memory atomics)
//   ragdot_moe_offsets  grid 1, block 1024: each expert's rows start after the earlier experts',
//                       each chunk's after the earlier chunks' (so the sort is stable); the count
//                       of out-of-range pairs, and the rows past the valid ones
//   ragdot_moe_scatter  grid num_chunks, block 32: walks its chunk 32 pairs at a time in order;
//                       lanes with the same expert are ranked by __match_any_sync
//   ragdot_moe_sort_one_block  grid 1, block 1024: the same sort in one launch (the three kernels
//                       above and four memsets cost ~25 us on 32768 pairs, mostly launch gaps
//                       and the offsets kernel's walk down each expert's column of chunks, both
//                       since cut; its one block walks every pair, which costs more)
//   ragdot_moe_gather   rows[r] = scale[t] * x[t] for the pair (t, j) of sorted row r (or
//                       pair_scale[pair] * x[t]: the combine's backward scaling dy by the weights)
//   ragdot_moe_gather_warps  the same, one warp per row with a lane's loads of the row in flight
//                       together (more bytes in flight than one 16-byte piece per thread)
//   ragdot_moe_combine  y[t] = (y[t] if accumulating) + addend[t] (if given)
//                       + sum_j weights[t, j] * rows[row_of[t, j]], in f32, in slot order
//   ragdot_moe_finish_combine  y[t] = acc[t] + addend[t] (if given): the end of a combine whose
//                       weighted rows an expert GEMM added into acc (f32) itself
//
// Pairs whose expert is out of range get no row (row_of = -1) and are counted in bad_experts;
// rows past the valid ones (pair_of = -1, written by the offsets kernel) are gathered as zeros. The scatter
// can also write each sorted row's token (token_of, -1 past the valid rows): the index through
// which an expert GEMM reads its rows straight from the tokens (PlanOptions::lhs_gather_rows),
// or adds them into their tokens' outputs (PlanOptions::out_scatter_rows), with each row's
// combine weight (weight_of, 0 past the valid rows) as its factor.
#pragma once

#include "ragdot/common.cuh"
#include "ragdot/moe_params.h"
#include "ragdot/moe_rows.cuh"

namespace ragdot {

__device__ __forceinline__ bool moe_expert_ok(int e, int num_experts) { return e >= 0 && e < num_experts; }

// One step of a warp's walk through its pairs in order: lane's pair `pair` (if `in`) has expert
// e (-1: out of range, or no pair). Lanes with the same expert take consecutive rows from
// next[e], in lane order; the step writes row_of, pair_of, token_of and weight_of.
__device__ __forceinline__ void moe_rank_step(const RagdotMoeSortParams& p, int* next, long long pair, bool in, int e,
                                              int lane) {
  const unsigned same = __match_any_sync(0xffffffffu, e);
  const int leader = __ffs(same) - 1;
  int base = 0;
  if (lane == leader && e >= 0) {
    base = next[e];
    next[e] = base + __popc(same);
  }
  base = __shfl_sync(0xffffffffu, base, leader);
  if (in) {
    const int row = e >= 0 ? base + __popc(same & ((1u << lane) - 1u)) : -1;
    p.row_of[pair] = row;
    if (row >= 0) {
      p.pair_of[row] = (int)pair;
      if (p.token_of) p.token_of[row] = (int)(pair / p.top_k);
      if (p.weight_of) p.weight_of[row] = p.pair_weights[pair];
    }
  }
  __syncwarp();  // next[] as this step left it, before the next step's leaders read it
}

}  // namespace ragdot

extern "C" __global__ void __launch_bounds__(32) ragdot_moe_count(const RagdotMoeSortParams p) {
  __shared__ int counts[RAGDOT_MOE_MAX_EXPERTS];
  const int lane = threadIdx.x, chunk = blockIdx.x;
  for (int e = lane; e < p.num_experts; e += 32) counts[e] = 0;
  __syncwarp();
  const long long first = (long long)chunk * RAGDOT_MOE_CHUNK;
  for (int i = lane; i < RAGDOT_MOE_CHUNK; i += 32) {
    const long long pair = first + i;
    if (pair >= p.pairs) break;
    const int e = p.experts[pair];
    if (ragdot::moe_expert_ok(e, p.num_experts)) atomicAdd(&counts[e], 1);  // (the others: pairs - rows, later)
  }
  __syncwarp();
  int* out = p.chunk_counts + (long long)chunk * p.num_experts;
  for (int e = lane; e < p.num_experts; e += 32) out[e] = counts[e];
}

namespace ragdot {

// column[c * stride] = update(column[c * stride]) for c in [0, n), in order. kBatch loads are
// issued before the stores that follow them, so a long column costs n / kBatch memory round trips.
template <int kBatch = 16, class Update>
__device__ __forceinline__ void moe_update_column(int* column, int n, long long stride, Update update) {
  for (int c0 = 0; c0 < n; c0 += kBatch) {
    int v[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) v[i] = c0 + i < n ? column[(c0 + i) * stride] : 0;
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      if (c0 + i < n) column[(c0 + i) * stride] = update(v[i]);
    }
  }
}

}  // namespace ragdot

// Each expert's column of chunk counts is split among `lanes` adjacent lanes of one warp (as many
// as 1024 threads give every expert, up to 32), each summing a stretch of it with its loads in
// flight together; a scan over the lanes and one over the experts then give each stretch its
// first row. (One thread per column walked 128 chunks in 16 dependent round trips: most of the
// sort's time on qwen3-30b-a3b's 32768 pairs.) It also writes what the memsets before the sort
// used to: the count of pairs whose expert is out of range (pairs - rows) and, for the rows past
// the valid ones, which belong to no pair, pair_of = token_of = -1 and weight_of = 0.
extern "C" __global__ void __launch_bounds__(1024) ragdot_moe_offsets(const RagdotMoeSortParams p) {
  __shared__ ragdot::i64 scratch[33];
  const int experts = p.num_experts, chunks = p.num_chunks;
  int lanes = 1;  // a power of two, so that an expert's lanes lie in one warp
  while (lanes < 32 && 2 * lanes * experts <= 1024) lanes *= 2;
  const int e = threadIdx.x / lanes, part = threadIdx.x % lanes;
  const bool mine = e < experts;
  const int per = (chunks + lanes - 1) / lanes;
  const int c0 = part * per < chunks ? part * per : chunks, c1 = c0 + per < chunks ? c0 + per : chunks;
  int* stretch = p.chunk_counts + (mine ? (long long)c0 * experts + e : 0);  // this lane's chunks of expert e's column
  int sum = 0;
  if (mine) {
    constexpr int kBatch = 8;
    for (int c = 0; c < c1 - c0; c += kBatch) {
      int v[kBatch];
#pragma unroll
      for (int i = 0; i < kBatch; ++i) v[i] = c + i < c1 - c0 ? stretch[(long long)(c + i) * experts] : 0;
#pragma unroll
      for (int i = 0; i < kBatch; ++i) sum += v[i];
    }
  }
  // the expert's rows in the earlier stretches, and in all of them (every lane of the warp takes part)
  int inclusive = sum;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int up = __shfl_up_sync(0xffffffffu, inclusive, d, lanes);
    if (d < lanes && part >= d) inclusive += up;
  }
  const int rows = __shfl_sync(0xffffffffu, inclusive, lanes - 1, lanes);
  ragdot::i64 valid = 0;
  const ragdot::i64 scanned = ragdot::block_exclusive_scan<1024>(mine && part == 0 ? rows : 0, scratch, valid);
  const int start = __shfl_sync(0xffffffffu, (int)scanned, 0, lanes);  // the expert's first row
  if (mine) {
    int running = start + inclusive - sum;
    ragdot::moe_update_column<8>(stretch, c1 - c0, experts, [&](int v) {
      const int first = running;
      running += v;
      return first;
    });
    if (part == 0) p.group_sizes[e] = rows;
  }
  if (threadIdx.x == 0) *p.bad_experts = (int)(p.pairs - valid);
  for (long long r = valid + threadIdx.x; r < p.pairs; r += blockDim.x) {
    p.pair_of[r] = -1;
    if (p.token_of) p.token_of[r] = -1;
    if (p.weight_of) p.weight_of[r] = 0.0f;
  }
}

extern "C" __global__ void __launch_bounds__(32) ragdot_moe_scatter(const RagdotMoeSortParams p) {
  __shared__ int next[RAGDOT_MOE_MAX_EXPERTS];
  const int lane = threadIdx.x, chunk = blockIdx.x;
  const int* starts = p.chunk_counts + (long long)chunk * p.num_experts;
  for (int e = lane; e < p.num_experts; e += 32) next[e] = starts[e];
  __syncwarp();
  const long long first = (long long)chunk * RAGDOT_MOE_CHUNK;
  for (int i = 0; i < RAGDOT_MOE_CHUNK; i += 32) {
    const long long pair = first + i + lane;
    const bool in = pair < p.pairs;
    int e = in ? p.experts[pair] : -1;
    if (!ragdot::moe_expert_ok(e, p.num_experts)) e = -1;
    ragdot::moe_rank_step(p, next, pair, in, e, lane);
  }
}

namespace ragdot {

// One block's sort: warp w ranks the w-th of 32 contiguous runs of pairs. `next` is the warp's row
// of the [32, experts] table: first its counts, then each expert's first row for this warp.
constexpr int kMoeSortWarps = 32;
constexpr int kMoeSortBatch = 8;  // loads of experts in flight per lane

// The experts of pairs i + 32 q + lane (q < kMoeSortBatch) of a run ending at `end`, -1 past it:
// all of a lane's loads are issued before any is used.
__device__ __forceinline__ void moe_load_experts(const RagdotMoeSortParams& p, long long i, long long end, int lane,
                                                 int (&e)[kMoeSortBatch]) {
#pragma unroll
  for (int q = 0; q < kMoeSortBatch; ++q) {
    const long long pair = i + 32 * q + lane;
    e[q] = pair < end ? __ldg(p.experts + pair) : -1;
  }
}

}  // namespace ragdot

extern "C" __global__ void __launch_bounds__(1024) ragdot_moe_sort_one_block(const RagdotMoeSortParams p) {
  using ragdot::kMoeSortBatch;
  extern __shared__ int table[];  // [32 warps][num_experts], 128 num_experts bytes of dynamic shared memory
  __shared__ ragdot::i64 scratch[33];
  const int experts = p.num_experts, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int i = threadIdx.x; i < ragdot::kMoeSortWarps * experts; i += blockDim.x) table[i] = 0;
  __syncthreads();
  const long long run = (p.pairs + ragdot::kMoeSortWarps - 1) / ragdot::kMoeSortWarps;
  const long long begin = warp * run, end = begin + run < p.pairs ? begin + run : p.pairs;
  int* next = table + warp * experts;

  // 1. this warp's count of each expert (the leader of each set of equal lanes adds the set)
  for (long long i = begin; i < end; i += 32 * kMoeSortBatch) {
    int e[kMoeSortBatch];
    ragdot::moe_load_experts(p, i, end, lane, e);
#pragma unroll
    for (int q = 0; q < kMoeSortBatch; ++q) {
      const int ex = ragdot::moe_expert_ok(e[q], experts) ? e[q] : -1;
      const unsigned same = __match_any_sync(0xffffffffu, ex);
      if (ex >= 0 && lane == __ffs(same) - 1) next[ex] += __popc(same);
      __syncwarp();
    }
  }
  __syncthreads();

  // 2. thread e: expert e's rows; every (expert, warp) starts after the earlier experts' rows and
  // the earlier warps' rows of the same expert, which keeps the pairs in order within an expert
  const int e = threadIdx.x;
  int rows = 0;
  if (e < experts) {
    for (int w = 0; w < ragdot::kMoeSortWarps; ++w) {
      int* c = table + w * experts + e;
      const int v = *c;
      *c = rows;
      rows += v;
    }
  }
  ragdot::i64 valid = 0;
  const int start = (int)ragdot::block_exclusive_scan<1024>(e < experts ? rows : 0, scratch, valid);
  if (e < experts) {
    p.group_sizes[e] = rows;
    for (int w = 0; w < ragdot::kMoeSortWarps; ++w) table[w * experts + e] += start;
  }
  if (threadIdx.x == 0) *p.bad_experts = (int)(p.pairs - valid);
  __syncthreads();

  // 3. this warp's pairs again, in order: lanes with the same expert take consecutive rows
  for (long long i = begin; i < end; i += 32 * kMoeSortBatch) {
    int ex[kMoeSortBatch];
    ragdot::moe_load_experts(p, i, end, lane, ex);
#pragma unroll
    for (int q = 0; q < kMoeSortBatch; ++q) {
      const long long pair = i + 32 * q + lane;
      ragdot::moe_rank_step(p, next, pair, pair < end, ragdot::moe_expert_ok(ex[q], experts) ? ex[q] : -1, lane);
    }
  }

  // 4. rows past the valid ones (pairs with an out-of-range expert) belong to no pair
  for (long long r = valid + threadIdx.x; r < p.pairs; r += blockDim.x) {
    p.pair_of[r] = -1;
    if (p.token_of) p.token_of[r] = -1;
    if (p.weight_of) p.weight_of[r] = 0.0f;
  }
}

namespace ragdot {

template <class T>
__device__ __forceinline__ void moe_gather_row(const RagdotMoeRowsParams& p, long long r) {
  typedef typename Storage<T>::type S;
  const int pair = p.pair_of[r];
  S* dst = (S*)p.rows + r * p.hidden;
  if (pair < 0) {
    for (long long c = threadIdx.x; c < p.hidden; c += blockDim.x) dst[c] = from_float(0.0f, T());
    return;
  }
  const long long t = pair / p.top_k;
  const S* src = (const S*)p.x + t * p.hidden;
  if (!p.scale && !p.pair_scale) {
    // 16-byte copies where the rows allow them
    const long long bytes = p.hidden * (long long)sizeof(S);
    if (bytes % 16 == 0 && ((unsigned long long)src % 16) == 0 && ((unsigned long long)dst % 16) == 0) {
      const uint4* s4 = (const uint4*)src;
      uint4* d4 = (uint4*)dst;
      for (long long c = threadIdx.x; c < bytes / 16; c += blockDim.x) d4[c] = s4[c];
    } else {
      for (long long c = threadIdx.x; c < p.hidden; c += blockDim.x) dst[c] = src[c];
    }
    return;
  }
  const float s = p.pair_scale ? p.pair_scale[pair] : p.scale[t];
  if (moe_rows_vectorizable(p.hidden, src, dst, 0)) {
    for (long long c = 8 * (long long)threadIdx.x; c < p.hidden; c += 8 * (long long)blockDim.x) {
      float v[8];
      moe_load8(src + c, v);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] *= s;
      moe_store8(dst + c, v);
    }
    return;
  }
  for (long long c = threadIdx.x; c < p.hidden; c += blockDim.x) dst[c] = from_float(s * to_float(src[c], T()), T());
}

template <class T>
__device__ __forceinline__ void moe_combine_token(const RagdotMoeRowsParams& p, long long t) {
  typedef typename Storage<T>::type S;
  S* out = (S*)p.y + t * p.hidden;
  const S* rows = (const S*)p.rows;
  const S* add = p.addend ? (const S*)p.addend + t * p.hidden : (const S*)0;
  const int* row_of = p.row_of + t * p.top_k;
  const float* weights = p.weights + t * p.top_k;
  if (moe_rows_vectorizable(p.hidden, p.rows, p.y, p.addend)) {
    // eight columns per thread: 16-byte loads of every source row
    for (long long c = 8 * (long long)threadIdx.x; c < p.hidden; c += 8 * (long long)blockDim.x) {
      float acc[8], v[8];
      if (p.accumulate) {
        moe_load8(out + c, acc);
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[i] = 0.0f;
      }
      if (add) {
        moe_load8(add + c, v);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[i] += v[i];
      }
      // top_k a multiple of kSlots (qwen3, deepseek-v3: 8): kSlots slots' loads in flight before
      // their sums, which keep slot order (a slot without a row loads row 0 and adds nothing).
      // Otherwise (mixtral 2, Llama-4 1) one slot at a time: a batch would load unused rows.
      constexpr int kSlots = sizeof(S) == 2 ? 4 : 2;
      if (p.top_k % kSlots == 0) {
        for (int j0 = 0; j0 < p.top_k; j0 += kSlots) {
          float u[kSlots][8];
          int row[kSlots];
#pragma unroll
          for (int q = 0; q < kSlots; ++q) {
            row[q] = row_of[j0 + q];
            moe_load8(rows + (long long)(row[q] < 0 ? 0 : row[q]) * p.hidden + c, u[q]);
          }
#pragma unroll
          for (int q = 0; q < kSlots; ++q) {
            // (w read before the skip: ptxas keeps this form in registers, at sm_80 too)
            const float w = row[q] < 0 ? 0.0f : weights[j0 + q];
            if (row[q] < 0) continue;
#pragma unroll
            for (int i = 0; i < 8; ++i) acc[i] += w * u[q][i];
          }
        }
      } else {
        for (int j = 0; j < p.top_k; ++j) {
          const int row = row_of[j];
          if (row < 0) continue;
          const float w = weights[j];
          moe_load8(rows + (long long)row * p.hidden + c, v);
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[i] += w * v[i];
        }
      }
      moe_store8(out + c, acc);
    }
    return;
  }
  for (long long c = threadIdx.x; c < p.hidden; c += blockDim.x) {
    float acc = p.accumulate ? to_float(out[c], T()) : 0.0f;
    if (add) acc += to_float(add[c], T());
    for (int j = 0; j < p.top_k; ++j) {
      const int row = row_of[j];
      if (row >= 0) acc += weights[j] * to_float(rows[(long long)row * p.hidden + c], T());
    }
    out[c] = from_float(acc, T());
  }
}

}  // namespace ragdot

// grid: blocks over the sorted rows (grid-stride), block 256
extern "C" __global__ void __launch_bounds__(256) ragdot_moe_gather(const RagdotMoeRowsParams p) {
  for (long long r = blockIdx.x; r < p.pairs; r += gridDim.x) {
    if (p.elem_bytes == 2) {
      ragdot::moe_gather_row<ragdot::BF16>(p, r);
    } else {
      ragdot::moe_gather_row<ragdot::F32>(p, r);
    }
  }
}

namespace ragdot {

// 16-byte pieces of a row that one lane loads before it stores any (ragdot_moe_gather_warps)
constexpr int kGatherUnroll = 8;

// The gather of sorted row r, whose pair is `pair`, by one warp: each lane issues all its loads
// of a stretch of kGatherUnroll x 32 pieces (a whole 4 KiB bf16 row of 2048) before their stores.
// Rows too many for L2 are stored streaming (evict first, p.stream_rows), so that the tokens' rows,
// read top_k times, stay there. The same values as moe_gather_row.
template <class T>
__device__ __forceinline__ void moe_gather_row_warp(const RagdotMoeRowsParams& p, long long r, int pair, int lane) {
  typedef typename Storage<T>::type S;
  S* dst = (S*)p.rows + r * p.hidden;
  if (pair < 0) {
    for (long long c = lane; c < p.hidden; c += 32) dst[c] = from_float(0.0f, T());
    return;
  }
  const long long t = pair / p.top_k;
  const S* src = (const S*)p.x + t * p.hidden;
  const long long bytes = p.hidden * (long long)sizeof(S);
  const bool scaled = p.scale || p.pair_scale;
  if (!scaled && bytes % 16 == 0 && ((unsigned long long)src % 16) == 0 && ((unsigned long long)dst % 16) == 0) {
    const uint4* s4 = (const uint4*)src;
    uint4* d4 = (uint4*)dst;
    const long long n = bytes / 16;
    for (long long c0 = lane; c0 < n; c0 += 32 * kGatherUnroll) {
      uint4 v[kGatherUnroll];
#pragma unroll
      for (int q = 0; q < kGatherUnroll; ++q) {
        if (c0 + 32 * q < n) v[q] = __ldg(s4 + c0 + 32 * q);
      }
#pragma unroll
      for (int q = 0; q < kGatherUnroll; ++q) {
        if (c0 + 32 * q >= n) continue;
        if (p.stream_rows) __stcs(d4 + c0 + 32 * q, v[q]);
        else d4[c0 + 32 * q] = v[q];
      }
    }
    return;
  }
  if (!scaled) {
    for (long long c = lane; c < p.hidden; c += 32) dst[c] = src[c];
    return;
  }
  const float s = p.pair_scale ? p.pair_scale[pair] : p.scale[t];
  if (moe_rows_vectorizable(p.hidden, src, dst, 0)) {
    constexpr int kUnroll = kGatherUnroll / 2;  // 8 elements each, in f32 registers
    for (long long c0 = 8 * (long long)lane; c0 < p.hidden; c0 += 8 * 32 * kUnroll) {
      float v[kUnroll][8];
#pragma unroll
      for (int q = 0; q < kUnroll; ++q) {
        if (c0 + 8 * 32 * q < p.hidden) moe_load8(src + c0 + 8 * 32 * q, v[q]);
      }
#pragma unroll
      for (int q = 0; q < kUnroll; ++q) {
        if (c0 + 8 * 32 * q >= p.hidden) continue;
#pragma unroll
        for (int i = 0; i < 8; ++i) v[q][i] *= s;
        moe_store8(dst + c0 + 8 * 32 * q, v[q], p.stream_rows != 0);
      }
    }
    return;
  }
  for (long long c = lane; c < p.hidden; c += 32) dst[c] = from_float(s * to_float(src[c], T()), T());
}

}  // namespace ragdot

// grid: warps over the sorted rows (grid-stride, about four rows per warp), block 256. A warp
// loads its next row's pair while it copies the current row. (ragdot_moe_gather gives each row a whole block, one 16-byte
// piece per thread behind two dependent round trips, the pair and then the row: on an H200 it
// moved qwen3-30b-a3b's rows at 2.5 TB/s, 0.78x the time of a copy that reads them from DRAM.)
extern "C" __global__ void __launch_bounds__(256) ragdot_moe_gather_warps(const RagdotMoeRowsParams p) {
  const int lane = threadIdx.x & 31;
  ragdot::moe_for_each_row_of_warp(p.pair_of, p.pairs, [&](long long r, int pair) {
    if (p.elem_bytes == 2) {
      ragdot::moe_gather_row_warp<ragdot::BF16>(p, r, pair, lane);
    } else {
      ragdot::moe_gather_row_warp<ragdot::F32>(p, r, pair, lane);
    }
  });
}

// grid: blocks over the tokens (grid-stride), block 256
extern "C" __global__ void __launch_bounds__(256) ragdot_moe_combine(const RagdotMoeRowsParams p) {
  for (long long t = blockIdx.x; t < p.tokens; t += gridDim.x) {
    if (p.elem_bytes == 2) {
      ragdot::moe_combine_token<ragdot::BF16>(p, t);
    } else {
      ragdot::moe_combine_token<ragdot::F32>(p, t);
    }
  }
}

// grid: grid-stride over groups of 8 elements (or elements) of [tokens, hidden], block 256
extern "C" __global__ void __launch_bounds__(256) ragdot_moe_finish_combine(const RagdotMoeRowsParams p) {
  const long long n = p.tokens * p.hidden, stride = (long long)gridDim.x * blockDim.x;
  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (p.elem_bytes == 2) {
    const ragdot::u16* add = (const ragdot::u16*)p.addend;
    ragdot::u16* y = (ragdot::u16*)p.y;
    if (ragdot::moe_rows_vectorizable(p.hidden, p.acc, y, add)) {
      for (long long i = 8 * first; i < n; i += 8 * stride) {
        float v[8], a[8];
        ragdot::moe_load8(p.acc + i, v);
        if (add) {
          ragdot::moe_load8(add + i, a);
#pragma unroll
          for (int e = 0; e < 8; ++e) v[e] += a[e];
        }
        ragdot::moe_store8(y + i, v);
      }
      return;
    }
    for (long long i = first; i < n; i += stride) {
      const float v = p.acc[i] + (add ? ragdot::to_float(add[i], ragdot::BF16()) : 0.0f);
      y[i] = ragdot::from_float(v, ragdot::BF16());
    }
    return;
  }
  const float* add = (const float*)p.addend;
  float* y = (float*)p.y;
  for (long long i = first; i < n; i += stride) y[i] = p.acc[i] + (add ? add[i] : 0.0f);
}
