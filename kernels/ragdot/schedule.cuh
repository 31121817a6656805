// The persistent tile scheduler every kernel family shares. Group sizes stay on the device: each
// CTA reads its row of group sizes, clamps them (negative -> 0, running sum capped at the ragged
// extent), and prefix-sums them into shared memory, so no pre-pass kernel and no host sync are
// needed. Tiles are linearized over (segment, n-tile, m-tile), m-tiles of one weight tile
// adjacent so that neighbouring CTAs share it in L2, in blocks of m-tiles whose rows fit in L2
// (raster.h). Mode 1 adds two zero segments (rows before the first computed group and past the
// last), which write zeros instead of computing. With the mixed order (tile_order.h) mode 1's
// groups are ranked by size and their tiles handed out from both ends of that list in turn.
#pragma once

#include "ragdot/common.cuh"
#include "ragdot/raster.h"
#include "ragdot/tile_order.h"

namespace ragdot {

// Where one CTA's outer index puts each operand, in elements.
struct OuterOffsets {
  i64 lhs, rhs, out, gs_row;
};

__device__ __forceinline__ OuterOffsets outer_offsets(const RagdotKernelParams& p, i64 outer_index) {
  OuterOffsets o = {0, 0, 0, 0};
  i64 gs = 0, rem = outer_index;
  for (int d = p.outer_rank - 1; d >= 0; --d) {
    const i64 i = rem % p.outer_size[d];
    rem /= p.outer_size[d];
    o.lhs += i * p.outer_lhs[d];
    o.rhs += i * p.outer_rhs[d];
    o.out += i * p.outer_out[d];
    gs += i * p.outer_gs[d];
  }
  o.gs_row = p.num_groups > 0 ? gs / p.num_groups : 0;
  return o;
}

// One unit of work. Rows are in the GEMM's m coordinates; k_begin/k_len in its k coordinates.
struct Tile {
  i64 m0, row_end;  // first row, one past the last row this tile may store
  i64 n0;
  i64 k_begin, k_len;
  int group;        // local group index (selects the weight matrix in mode 1, the output in mode 2)
  bool zero;        // write zeros, read nothing
  // CTA pairs along m (Scheduler's kPairRows): whether both CTAs of this tile's pair multiply the
  // same weights (one group; or the other CTA has no rows), so that they can share B's loads
  bool pair_shared;
};

// kMixable: the kernel has the mixed order's code (tile_order.h), taken where the launch asks for
// it; without, RagdotKernelParams::tile_order is ignored. The wgmma family has it; the other
// families hand out tiles round-robin, where the order matters less.
//
// kPairRows (mode 1, CTA pairs along m; kMixable must be off): a unit is two tiles of kBM rows at
// one column tile, the next two of all the computed groups' m tiles taken in order, so that the
// pair's second tile may lie in the next group. A group whose tile count is odd then leaves
// neither CTA of a pair idle; the pair that spans two groups multiplies two weight matrices and
// shares no loads. The zero segments keep units of 2 kBM rows of their own. cta_tile() gives each
// CTA its tile of a unit. The table then holds the computed groups' m-tile prefix in place of
// their unit prefix (unit_prefix() derives it), so it takes no more shared memory.
template <int kMode, int kBM, int kBN, int kThreads, bool kMixable = false, bool kPairRows = false>
struct Scheduler {
  static_assert(!kPairRows || (kMode == 1 && !kMixable), "pairs across groups: mode 1, plain order");
  // Shared memory this scheduler needs, in bytes (group starts + tile prefix + the launch's order),
  // for G groups.
  __host__ __device__ static constexpr i64 smem_bytes(i64 groups, i64 local_groups) {
    return ((groups + 1) + (local_groups + 4)) * 4;
  }

  int* starts;       // [G + 1], clamped group starts in group-size units
  // [S + 1], mode 1 only; in the mixed order, in size order, each packed with its segment. Then
  // one int: 1 when this launch takes the mixed order (tile_order.h). The flag stays in shared
  // memory, read by each tile(), rather than in a register: the producer runs on 56.
  // kPairRows: places 0..L hold the computed groups' m tiles (of kBM rows) before each group,
  // places L + 1 and L + 2 the units before the tail zero segment and in all.
  int* tile_prefix;
  int segments;
  int offset;        // first computed group
  i64 n_tiles, total_tiles;
  i64 m, unit;

  __device__ __forceinline__ void init(const RagdotKernelParams& p, i64 gs_row, int* smem, i64* scan_scratch) {
    const int G = p.num_groups, L = p.computed_groups;
    starts = smem;
    tile_prefix = smem + (G + 1);
    m = p.m;
    unit = p.ragged_unit;
    n_tiles = ceil_div(p.n, kBN);
    offset = 0;
    if (kMode == 3) {
      segments = 1;
      total_tiles = ceil_div(p.m, kBM) * n_tiles;
      return;
    }
    if (p.group_offset != 0 && L < G) offset = imin(imax(*p.group_offset, 0), G - L);

    // 1. clamped group starts
    const int per_thread = (G + kThreads - 1) / kThreads;
    const int first = threadIdx.x * per_thread, last = imin(first + per_thread, G);
    const i64 extent = p.ragged_extent;
    // Each size is clamped to [0, extent] before it is added, so that no sum of 64-bit sizes can
    // wrap around (G * extent < 2^63) and the capped starts stay in [0, extent].
    i64 local = 0;
    for (int i = first; i < last; ++i) local += clamped_size(p, gs_row, i, extent);
    i64 total;
    i64 running = block_exclusive_scan<kThreads>(local, scan_scratch, total);
    for (int i = first; i < last; ++i) {
      starts[i] = (int)imin(running, extent);
      running += clamped_size(p, gs_row, i, extent);
    }
    if (threadIdx.x == 0) starts[G] = (int)imin(total, extent);
    __syncthreads();

    if (kMode == 2) {
      segments = L;
      total_tiles = (i64)L * ceil_div(p.m, kBM) * n_tiles;
      return;
    }
    // 2. mode 1: tiles per segment (L groups, then the head and tail zero segments), prefix-summed
    segments = L + 2;
    bool mixed = kMixable && p.tile_order != RAGDOT_ORDER_PLAIN && L > 0 &&
            ragdot_mixed_order_fits(segments, (ceil_div(p.m, kBM) + segments) * n_tiles);
    const int* st = starts + offset;
    if (mixed && p.tile_order == RAGDOT_ORDER_AUTO) {
      // a balanced launch keeps the plain order, and skips the ranking: the largest group first
      if (threadIdx.x == 0) tile_prefix[0] = 0;
      __syncthreads();
      int largest = 0;
      for (int i = threadIdx.x; i < L; i += kThreads) largest = imax(largest, st[i + 1] - st[i]);
      atomicMax(&tile_prefix[0], largest);
      __syncthreads();
      mixed = ragdot_mixed_order_pays(tile_prefix[0], st[L] - st[0], L);
      __syncthreads();  // every thread has read it before place 0 is written again
    }
    if (mixed) {
      // the sorted list's place r holds segment s (for now, unpacked); the zero segments stay last
      for (int i = threadIdx.x; i < L; i += kThreads)
        tile_prefix[ragdot_size_rank(i, L, [st](int j) { return st[j + 1] - st[j]; })] = i;
      if (threadIdx.x == 0) tile_prefix[L] = L, tile_prefix[L + 1] = L + 1;
      __syncthreads();
    }
    // each thread reads and then overwrites only its own places [sfirst, slast)
    const int spt = (segments + kThreads - 1) / kThreads;
    const int sfirst = threadIdx.x * spt, slast = imin(sfirst + spt, segments);
    if constexpr (kPairRows) {
      // the computed groups' m tiles, prefix-summed: the pairs are cut from that sequence
      i64 own = 0;
      for (int s = sfirst; s < imin(slast, L); ++s) own += segment_m_tiles(s, L, kBM);
      i64 all_tiles;
      i64 before = block_exclusive_scan<kThreads>(own, scan_scratch, all_tiles);
      for (int s = sfirst; s < imin(slast, L); ++s) {
        tile_prefix[s] = (int)before;
        before += segment_m_tiles(s, L, kBM);
      }
      if (threadIdx.x == 0) {
        tile_prefix[L] = (int)all_tiles;
        // then the zero segments (head L, tail L + 1), in units of 2 kBM rows
        tile_prefix[L + 1] = (int)(unit_prefix(L, L) + segment_m_tiles(L, L, 2 * kBM) * n_tiles);
        tile_prefix[L + 2] = (int)(tile_prefix[L + 1] + segment_m_tiles(L + 1, L, 2 * kBM) * n_tiles);
      }
      __syncthreads();
      total_tiles = tile_prefix[L + 2];
      return;
    }
    i64 tiles = 0;
    for (int s = sfirst; s < slast; ++s) tiles += segment_tiles(mixed ? tile_prefix[s] : s, L);
    i64 run = block_exclusive_scan<kThreads>(tiles, scan_scratch, total);
    for (int s = sfirst; s < slast; ++s) {
      const int segment = mixed ? tile_prefix[s] : s;
      tile_prefix[s] = mixed ? ragdot_order_pack((int)run, segment) : (int)run;
      run += segment_tiles(segment, L);
    }
    if (threadIdx.x == 0) {
      tile_prefix[segments] = mixed ? ragdot_order_pack((int)total, 0) : (int)total;
      if (kMixable) tile_prefix[segments + 1] = mixed ? 1 : 0;
    }
    total_tiles = total;
    __syncthreads();
  }

  // Mode 1: whether this launch takes the mixed order.
  __device__ __forceinline__ bool mixed_order() const { return kMixable && tile_prefix[segments + 1] != 0; }

  // Tiles that multiply (mode 1: those of the computed groups, before the two zero segments).
  __device__ __forceinline__ int compute_tiles() const {
    if (kMode != 1) return (int)total_tiles;
    if (kPairRows) return unit_prefix(segments - 2, segments - 2);
    return mixed_order() ? ragdot_order_prefix(tile_prefix[segments - 2]) : tile_prefix[segments - 2];
  }

  __device__ __forceinline__ static i64 read_size(const RagdotKernelParams& p, i64 row, int i) {
    const i64 idx = row * p.num_groups + i;
    return p.gs_is_int64 ? ((const i64*)p.group_sizes)[idx] : (i64)((const int*)p.group_sizes)[idx];
  }
  __device__ __forceinline__ static i64 clamped_size(const RagdotKernelParams& p, i64 row, int i, i64 extent) {
    return imin(imax(read_size(p, row, i), (i64)0), extent);
  }

  // Mode 1 segment rows: [begin, end) in m.
  __device__ __forceinline__ void segment_rows(int s, int L, i64& begin, i64& end) const {
    if (s < L) {
      begin = (i64)starts[offset + s] * unit;
      end = (i64)starts[offset + s + 1] * unit;
    } else if (s == L) {
      begin = 0;
      end = (i64)starts[offset] * unit;
    } else {
      begin = (i64)starts[offset + L] * unit;
      end = m;
    }
  }
  // Mode 1 segment s's tiles, and its m tiles of `rows` rows.
  __device__ __forceinline__ i64 segment_tiles(int s, int L) const { return segment_m_tiles(s, L, kBM) * n_tiles; }
  __device__ __forceinline__ i64 segment_m_tiles(int s, int L, i64 rows) const {
    i64 b, e;
    segment_rows(s, L, b, e);
    return ceil_div(e - b, rows);
  }
  // kPairRows: the first pair whose first m tile lies in computed group s or later (each pair
  // belongs to the group of its first tile), s <= L
  __device__ __forceinline__ int first_pair(int s) const { return (tile_prefix[s] + 1) >> 1; }
  // kPairRows: the units before segment s (s <= L + 2)
  __device__ __forceinline__ int unit_prefix(int s, int L) const {
    return s <= L ? first_pair(s) * (int)n_tiles : tile_prefix[s];
  }

  __device__ __forceinline__ Tile tile(const RagdotKernelParams& p, i64 t) const {
    Tile r;
    r.zero = false;
    r.pair_shared = true;
    r.group = 0;
    if (kMode == 3) {
      const i64 m_tiles = ceil_div(p.m, kBM);
      r.m0 = (t % m_tiles) * kBM;
      r.n0 = (t / m_tiles) * kBN;
      r.row_end = p.m;
      r.k_begin = 0;
      r.k_len = p.k;
      return r;
    }
    if (kMode == 2) {
      const i64 m_tiles = ceil_div(p.m, kBM);
      const i64 per_group = m_tiles * n_tiles;
      const int g = (int)(t / per_group);
      const i64 local = t - g * per_group;
      r.group = g;
      r.row_end = p.m;
      r.k_begin = (i64)starts[offset + g] * unit;
      r.k_len = (i64)starts[offset + g + 1] * unit - r.k_begin;
      u32 mt, nt;
      ragdot_raster_tile((u32)local, (u32)m_tiles, (u32)n_tiles,
                         ragdot_raster_block(p.raster_lhs_elems, kBM, r.k_len, (u32)m_tiles), &mt, &nt);
      r.m0 = (i64)mt * kBM;
      r.n0 = (i64)nt * kBN;
      return r;
    }
    if constexpr (kPairRows) return cta_tile(p, t, 0);
    if constexpr (kMixable) {
      if (mixed_order()) return mode1_tile<true>(p, t);
    }
    return mode1_tile<false>(p, t);
  }

  // Mode 1's tile t: the place in the table whose tile range holds t (binary search over the
  // prefix), then the tile there. In the mixed order t is first mapped to its place in the ranked
  // list and the table's entries are packed. (Two instantiations rather than a flag tested in the
  // search: kernels without the mixed order keep exactly the code they had, which ptxas fits in
  // their registers with none to spare.)
  template <bool kMixed>
  __device__ __forceinline__ Tile mode1_tile(const RagdotKernelParams& p, i64 t) const {
    if (kMixed) t = (i64)ragdot_mixed_position((unsigned)t, (unsigned)ragdot_order_prefix(tile_prefix[segments - 2]));
    auto prefix = [this](int q) { return kMixed ? ragdot_order_prefix(tile_prefix[q]) : tile_prefix[q]; };
    int lo = 0, hi = segments;  // prefix(lo) <= t < prefix(hi)
    while (hi - lo > 1) {
      const int mid = (lo + hi) >> 1;
      if ((i64)prefix(mid) <= t) lo = mid; else hi = mid;
    }
    const int L = p.computed_groups;
    const int segment = kMixed ? ragdot_order_segment(tile_prefix[lo]) : lo;
    i64 begin, end;
    segment_rows(segment, L, begin, end);
    const i64 m_tiles = ceil_div(end - begin, kBM);
    const i64 local = t - prefix(lo);
    u32 mt, nt;
    ragdot_raster_tile((u32)local, (u32)m_tiles, (u32)n_tiles,
                       ragdot_raster_block(p.raster_lhs_elems, kBM, p.k, (u32)m_tiles), &mt, &nt);
    Tile r;
    r.pair_shared = true;
    r.group = segment;
    r.zero = segment >= L;
    r.m0 = begin + (i64)mt * kBM;
    r.n0 = (i64)nt * kBN;
    r.row_end = end;
    r.k_begin = 0;
    r.k_len = p.k;
    return r;
  }

  // kPairRows: the tile of unit t that the CTA of rows `rm` (0 or 1) of the pair multiplies. The
  // unit is pair q of the computed groups' m tiles (tiles 2q and 2q + 1 of that sequence), or in a
  // zero segment rows [rm kBM, rm kBM + kBM) of its 2 kBM-row block. A CTA whose tile would lie
  // past the last group's gets the pair's group with no rows (row_end = m0).
  __device__ __forceinline__ Tile cta_tile(const RagdotKernelParams& p, i64 t, u32 rm) const {
    const int L = p.computed_groups;
    int lo = 0, hi = segments;  // unit_prefix(lo) <= t < unit_prefix(hi)
    while (hi - lo > 1) {
      const int mid = (lo + hi) >> 1;
      if ((i64)unit_prefix(mid, L) <= t) lo = mid; else hi = mid;
    }
    i64 begin, end;
    segment_rows(lo, L, begin, end);
    const bool zero = lo >= L;
    const i64 units = zero ? ceil_div(end - begin, 2 * kBM) : first_pair(lo + 1) - first_pair(lo);
    u32 mt, nt;
    ragdot_raster_tile((u32)(t - unit_prefix(lo, L)), (u32)units, (u32)n_tiles,
                       ragdot_raster_block(p.raster_lhs_elems, 2 * kBM, p.k, (u32)units), &mt, &nt);
    Tile r;
    r.zero = zero;
    r.n0 = (i64)nt * kBN;
    r.k_begin = 0;
    r.k_len = p.k;
    r.group = lo;
    r.pair_shared = true;
    r.row_end = end;
    if (zero) {
      r.m0 = begin + (i64)mt * (2 * kBM) + (i64)rm * kBM;
      return r;
    }
    const int first = 2 * (first_pair(lo) + (int)mt);  // the pair's first m tile, in group lo
    const int total = tile_prefix[L];
    // the second tile lies in group lo, or in a later group, or past the last
    r.pair_shared = first + 1 < tile_prefix[lo + 1] || first + 1 >= total;
    const int mine = first + (int)rm;
    if (mine >= total) {
      r.m0 = end;  // no rows
      return r;
    }
    int g = lo;  // the group of tile `mine`: the last with tile_prefix[g] <= mine (empty groups skipped)
    if (mine >= tile_prefix[lo + 1]) {
      int a = lo + 1, b = L;  // tile_prefix[a] <= mine < tile_prefix[b]
      while (b - a > 1) {
        const int mid = (a + b) >> 1;
        if (tile_prefix[mid] <= mine) a = mid; else b = mid;
      }
      g = a;
      segment_rows(g, L, begin, end);
      r.group = g;
      r.row_end = end;
    }
    r.m0 = begin + (i64)(mine - tile_prefix[g]) * kBM;
    return r;
  }
};

// Where a tile starts in each operand, in elements. The tile's group selects the weight matrix in
// mode 1 and the output block in mode 2; in mode 2 its k range starts at the group's first row.
template <int kMode>
__device__ __forceinline__ i64 tile_lhs_offset(const RagdotKernelParams& p, const Tile& t) {
  return t.m0 * p.lhs_m + t.k_begin * p.lhs_k;
}
template <int kMode>
__device__ __forceinline__ i64 tile_rhs_offset(const RagdotKernelParams& p, const Tile& t) {
  return t.n0 * p.rhs_n + t.k_begin * p.rhs_k + (kMode == 1 ? t.group * p.rhs_g : 0);
}
template <int kMode>
__device__ __forceinline__ i64 tile_out_offset(const RagdotKernelParams& p, const Tile& t) {
  return t.m0 * p.out_m + t.n0 * p.out_n + (kMode == 2 ? t.group * p.out_g : 0);
}

// Writes zeros to rows [0, rows) x cols [0, cols) of a tile of the output.
template <class OutT, int kThreads, int kBN>
__device__ __forceinline__ void store_zero_tile(typename Storage<OutT>::type* out, i64 out_m, i64 out_n, i64 rows,
                                                i64 cols) {
  typedef typename Storage<OutT>::type O;
  const i64 count = rows * kBN;
  for (i64 i = threadIdx.x; i < count; i += kThreads) {
    const i64 r = i / kBN, c = i % kBN;
    if (c < cols) out[r * out_m + c * out_n] = from_float(0.0f, OutT());
  }
}

}  // namespace ragdot
