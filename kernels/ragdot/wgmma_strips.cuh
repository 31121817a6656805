// Hopper family, weight gradient in strips (kStrips, mode 2; strips.h says why): a unit of work is
// a run of 128 x kBN output tiles of one group and one column tile. Shared memory holds two rings:
// A tiles (128 m x 64 k, one per k step of each output tile) and B slots (64 k x kBN, one per k
// step). While the group's k steps fit in the B slots, the producer loads the strip's B once, at
// its first tile, and only A for the tiles after; the consumers keep B's slots until the strip's
// last tile is done. A group with more k steps streams B per k step, one tile per unit, through
// the same slots. B's slots are taken in turn across units, so the next strip's B loads while
// this one runs wherever the two strips' k steps fit in the slots together (four slots at bn 256:
// two groups of up to 128 rows, two k steps each; deepseek-v3's groups are 128 +- 11 rows).
//
// The rest is the plain kernel's (wgmma.cuh): the tile counter and ring, the k steps' protocol,
// the k tail past a group's end cleared in both operands, and its two epilogues: from the
// registers, or (kTmaStore, 16-bit outputs) through a staging area after B's slots with TMA bulk
// stores. A tile's 64 KiB of output take longer to store than its two k steps take to multiply;
// register stores hold the warps until the memory system takes them, while a bulk store lets the
// warpgroup go on to the next tile's wgmma as its boxes drain.
//
// Turns (kPingPong): a tile has two k steps and 64 KiB of output, so its warpgroups spend longer
// storing than multiplying, and in step with each other they leave the tensor cores idle while
// both store. With turns, the warpgroups multiply one at a time, in a fixed order (warpgroup 0's
// rows of a tile, then warpgroup 1's, then warpgroup 0's of the next tile), each handing the turn
// on once its wgmma are done, so that one stores while the other multiplies. The warpgroup whose
// turn comes first on a tile (0) also clears the k tail past the group's end in both operands,
// alone, and the hand-over orders those writes before the other's wgmma. A turn holds all of a
// tile's k steps before the other warpgroup frees any, so only tiles whose k steps fit in the A
// ring with B resident take turns; the others (a streamed group's) run in step, as without turns.
#pragma once

#include "ragdot/strips.h"
#include "ragdot/wgmma.cuh"

namespace ragdot {
namespace hopper {

// The two rings' full/empty barriers, at fixed shared-memory addresses (no registers hold them):
// room for the most A tiles the override allows (8 stages) and the most B slots (bn 64).
constexpr int kStripMaxAStages = 8, kStripMaxBSlots = ragdot_strip_b_slots(64);
struct StripBarriers {
  u64 full_a[kStripMaxAStages], empty_a[kStripMaxAStages];
  u64 full_b[kStripMaxBSlots], empty_b[kStripMaxBSlots];
};
__shared__ __align__(8) StripBarriers strip_bars;

template <class V, class Mma>
struct Strips {
  typedef Kernel<V, Mma> K;
  static constexpr int kBM = 128, kBN = V::kBN, kBK = 64;
  static constexpr int kAStages = V::kStages;                    // the ring of A tiles
  static constexpr int kBSlots = ragdot_strip_b_slots(kBN);      // the ring of B's k steps
  static constexpr int kABytes = kBM * kBK * 2, kBBytes = kBN * kBK * 2;
  static constexpr int kAcc = K::kAcc;
  typedef typename K::Sched Sched;
  typedef typename K::O O;
  static_assert(V::kStrips && V::kMode == 2 && V::kCluster == 1 && !V::kGatherA && !V::kSwapAB && !V::kSplitTail &&
                    !V::kSwiglu && !V::kScatterOut && !V::kOverlapStore,
                "strips: the weight gradient on one CTA per unit, with the register or the TMA-store epilogue");
  static_assert(kBSlots >= 2 && kBSlots <= kStripMaxBSlots && kBSlots * kBBytes <= RAGDOT_STRIP_B_BYTES, "B's slots");
  static_assert(kAStages >= 2 && kAStages <= kStripMaxAStages, "A's ring");

  static __device__ __forceinline__ u32 full_a(u32 i) { return smem_address(&strip_bars.full_a[i % kAStages]); }
  static __device__ __forceinline__ u32 empty_a(u32 i) { return smem_address(&strip_bars.empty_a[i % kAStages]); }
  static __device__ __forceinline__ u32 full_b(u32 i) { return smem_address(&strip_bars.full_b[i % kBSlots]); }
  static __device__ __forceinline__ u32 empty_b(u32 i) { return smem_address(&strip_bars.empty_b[i % kBSlots]); }

  // A unit, looked up from its index: group, column, first m tile and count, k range.
  struct Unit {
    int group, n0, m_tile, count, k_steps;
    int k_begin, k_len;
    bool resident;  // B loaded once for all `count` tiles
  };

  static __device__ __forceinline__ int group_k_steps(const Sched& s, int g, int& k_begin, int& k_len) {
    k_begin = (int)((i64)s.starts[s.offset + g] * s.unit);
    k_len = (int)((i64)s.starts[s.offset + g + 1] * s.unit - k_begin);
    return (int)ceil_div(k_len, kBK);
  }
  static __device__ __forceinline__ int m_tiles(const RagdotKernelParams& p) { return (int)ceil_div(p.m, kBM); }

  // Each group's units (strips.h), prefix-summed into the scheduler's tile prefix; the tile counter
  // then hands out units. Every thread of the CTA. (The same prefix as Scheduler::init's over mode 1
  // segments; folding both into one helper changed the plain kernels' machine code, which this
  // machine cannot time, so the two stay apart.)
  static __device__ __forceinline__ void count_units(const RagdotKernelParams& p, Sched& s, i64* scratch) {
    const int L = p.computed_groups, mt = m_tiles(p), nt = (int)s.n_tiles;
    constexpr int kThreads = K::kThreads;
    const int per = (L + kThreads - 1) / kThreads, first = (int)threadIdx.x * per, last = imin(first + per, L);
    auto units = [&](int g) {
      int b, len;
      return (i64)ragdot_strip_units(group_k_steps(s, g, b, len), kBSlots, mt, nt);
    };
    i64 local = 0;
    for (int g = first; g < last; ++g) local += units(g);
    i64 total;
    i64 run = block_exclusive_scan<kThreads>(local, scratch, total);
    for (int g = first; g < last; ++g) {
      s.tile_prefix[g] = (int)run;
      run += units(g);
    }
    if (threadIdx.x == 0) s.tile_prefix[L] = (int)total;
    s.total_tiles = total;
    __syncthreads();
  }

  static __device__ __forceinline__ Unit unit(const RagdotKernelParams& p, const Sched& s, int u) {
    int lo = 0, hi = p.computed_groups;  // tile_prefix[lo] <= u < tile_prefix[hi]
    while (hi - lo > 1) {
      const int mid = (lo + hi) >> 1;
      if (s.tile_prefix[mid] <= u) lo = mid; else hi = mid;
    }
    Unit w;
    w.group = lo;
    w.k_steps = group_k_steps(s, lo, w.k_begin, w.k_len);
    w.resident = ragdot_strip_resident(w.k_steps, kBSlots);
    int n_tile;
    ragdot_strip_unit(u - s.tile_prefix[lo], w.resident, m_tiles(p), &n_tile, &w.m_tile, &w.count);
    w.n0 = n_tile * kBN;
    return w;
  }

  static __device__ __forceinline__ void run(const RagdotKernelParams& p, const TensorMap* map_a, const TensorMap* map_b,
                                             unsigned char* smem, const TensorMap* map_out = nullptr) {
    __shared__ i64 scan_scratch[33];
    Sched sched;
    sched.init(p, 0, (int*)smem, scan_scratch);
    count_units(p, sched, scan_scratch);
    const u32 table_end = smem_address(smem) + (u32)Sched::smem_bytes(p.num_groups, p.computed_groups);
    const u32 a_ring = (table_end + 1023u) & ~1023u, b_ring = a_ring + kAStages * kABytes;
    // kTmaStore: each consumer warpgroup's two box buffers, after B's slots (1024-aligned, as the
    // boxes' 128-byte swizzle needs)
    const u32 staging = b_ring + kBSlots * kBBytes;

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (threadIdx.x == 0) {
      // full: the producer's expect_tx; empty: one arrival per consumer warpgroup
      for (int s = 0; s < kAStages; ++s) mbar_init(full_a(s), 1), mbar_init(empty_a(s), 2);
      for (int s = 0; s < kBSlots; ++s) mbar_init(full_b(s), 1), mbar_init(empty_b(s), 2);
      for (int s = 0; s < kTileSlots; ++s) {
        mbar_init(smem_address(&tile_ring.full[s]), 1);
        mbar_init(smem_address(&tile_ring.empty[s]), K::kTileReaders);
      }
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
      prefetch_map(map_a);
      prefetch_map(map_b);
      if (V::kTmaStore) prefetch_map(map_out);
    }
    __syncthreads();
    if (warp < 4) {
      regs_dealloc<56>();
      if (warp == 0 && lane == 0) produce(p, sched, map_a, map_b, a_ring, b_ring);
    } else {
      regs_alloc<224>();
      const int wg = (threadIdx.x - 128) >> 7;
      consume(p, sched, a_ring, b_ring, wg, map_out, staging + wg * (K::kStagingBytes / 2));
    }
  }

  // One thread. `ia` counts A tiles, `ib` B slots, both across units.
  static __device__ __forceinline__ void produce(const RagdotKernelParams& p, const Sched& sched, const TensorMap* map_a,
                                                 const TensorMap* map_b, u32 a_ring, u32 b_ring) {
    u32 ia = 0, ib = 0;
    for (u32 n = 0;; ++n) {
      const int t = K::next_tile(p, sched, n);
      if (t < 0) break;
      const Unit w = unit(p, sched, t);
      for (int i = 0; i < w.count; ++i) {
        const int m0 = (w.m_tile + i) * kBM;
        auto load_a = [&](int kt) {
          const u32 a = ia + (u32)kt, full = full_a(a), dst = a_ring + (a % kAStages) * kABytes;
          mbar_wait(empty_a(a), ((a / kAStages) & 1) ^ 1);
          mbar_expect_tx(full, kABytes);
          K::load_a_box(dst, map_a, full, m0, w.k_begin + kt * kBK, 0, 0);
          K::load_a_box(dst, map_a, full, m0, w.k_begin + kt * kBK, 1, 0);
        };
        auto load_b = [&](int kt) {
          const u32 b = ib + (u32)kt;
          mbar_wait(empty_b(b), ((b / kBSlots) & 1) ^ 1);
          mbar_expect_tx(full_b(b), kBBytes);
          K::load_b(b_ring + (b % kBSlots) * kBBytes, map_b, full_b(b), w.n0, w.k_begin + kt * kBK, 0, 0, 0);
        };
        // B's slots may still be held by the strip before (they go back after its last tile): A
        // runs `lag` k steps ahead of B, so that A's tiles load meanwhile. A step j needs the
        // consumers to free step j - kAStages, which needs B of step j - kAStages + 1: issued at
        // least one step before, as lag <= kAStages - 2.
        const bool with_b = i == 0 || !w.resident;
        const int lag = with_b ? kAStages - 2 : 0;
        for (int j = 0; j < w.k_steps + lag; ++j) {
          if (j < w.k_steps) load_a(j);
          if (with_b && j >= lag) load_b(j - lag);
        }
        ia += (u32)w.k_steps;
        if (!w.resident) ib += (u32)w.k_steps;
      }
      if (w.resident) ib += (u32)w.k_steps;
    }
  }

  // kPingPong: named barriers 4 and 5 pass the turn to warpgroup 0 and 1 (bar.arrive by the one
  // handing it on, bar.sync by the one taking it; barriers 0-3 are __syncthreads, consumers_sync
  // and warpgroup_sync).
  static __device__ __forceinline__ void take_turn(int wg) {
    asm volatile("bar.sync %0, 256;\n" ::"r"(4 + wg) : "memory");
  }
  static __device__ __forceinline__ void hand_turn(int wg) {
    asm volatile("bar.arrive %0, 256;\n" ::"r"(5 - wg) : "memory");
  }

  static __device__ __forceinline__ void consume(const RagdotKernelParams& p, const Sched& sched, u32 a_ring,
                                                 u32 b_ring, int wg, const TensorMap* map_out, u32 staging) {
    const int tid = threadIdx.x & 127, warp = tid >> 5, lane = tid & 31;
    O* out = (O*)p.out;
    u32 ia = 0, ib = 0;
    float acc[kAcc];
    int turns = 0;  // kPingPong: tiles taken in turns so far (warpgroup 0 takes the first without waiting)
    u32 stores = 0;  // kTmaStore: this warpgroup's boxes sent so far (their buffers alternate)
    for (u32 n = 0;; ++n) {
      const int t = K::take_tile(n);
      if (t < 0) break;
      const Unit w = unit(p, sched, t);
      for (int i = 0; i < w.count; ++i) {
        // zeroed on every path (see K::consume)
#pragma unroll
        for (int j = 0; j < kAcc; ++j) acc[j] = 0.0f;
        const bool in_turn = V::kPingPong && w.resident && w.k_steps <= kAStages;
        if (in_turn) {
          if (wg == 1 || turns > 0) take_turn(wg);
          ++turns;
        }
        if (w.k_steps > 0) {
          K::k_protocol(
              0, w.k_steps, ia, acc,
              [&](u32 a, int kt) {
                mbar_wait(full_a(a), (a / kAStages) & 1);
                const u32 b = ib + (u32)kt;
                mbar_wait(full_b(b), (b / kBSlots) & 1);
              },
              [&](u32 a, int kt) {
                // the group ends inside this k step: its rows past the end are the next group's
                // (or past the tensor), cleared in A's tile and, the first time B's slot is used, in B
                const int valid = imin(w.k_len - kt * kBK, kBK);
                if (in_turn) {
                  // warpgroup 0 alone, on its turn; warpgroup 1 multiplies after it hands the turn on
                  if (valid < kBK && wg == 0) {
                    K::clear_k_lines(a_ring + (a % kAStages) * kABytes, 2, valid, tid, 128);
                    if (i == 0 || !w.resident)
                      K::clear_k_lines(b_ring + ((ib + (u32)kt) % kBSlots) * kBBytes, kBN / 64, valid, tid, 128);
                    fence_async_shared();
                    warpgroup_sync(0);
                  }
                } else if (valid < kBK) {
                  K::clear_k_lines(a_ring + (a % kAStages) * kABytes, 2, valid);
                  if (i == 0 || !w.resident) K::clear_k_lines(b_ring + ((ib + (u32)kt) % kBSlots) * kBBytes, kBN / 64, valid);
                  fence_async_shared();
                  consumers_sync();
                }
              },
              [&](u32 a, int kt) {
                const u32 a_tile = a_ring + (a % kAStages) * kABytes + wg * (64 * 128);
                const u32 b_tile = b_ring + ((ib + (u32)kt) % kBSlots) * kBBytes;
#pragma unroll
                for (int ks = 0; ks < kBK / 16; ++ks)
                  Mma::run(acc, smem_desc(a_tile + ks * 2048, kBK * 128, 1024), smem_desc(b_tile + ks * 2048, kBK * 128, 1024),
                           1);
              },
              [&](u32 a, int kt) {
                if (tid == 0) {
                  mbar_arrive(empty_a(a));
                  if (!w.resident) mbar_arrive(empty_b(ib + (u32)kt));
                }
              });
          if (!w.resident) {
            ib += (u32)w.k_steps;
          } else if (i == w.count - 1 && tid == 0) {
            // the strip's last tile is done with B (k_protocol waited for its wgmma): the slots go
            // back before the epilogue, so that the next strip's B loads meanwhile
            for (int kt = 0; kt < w.k_steps; ++kt) mbar_arrive(empty_b(ib + (u32)kt));
          }
        }
        if (in_turn) hand_turn(wg);  // (k_protocol waited for this warpgroup's wgmma)
        // epilogue (an empty group's tiles are zeros)
        Tile tile;
        tile.m0 = (i64)(w.m_tile + i) * kBM;
        tile.n0 = w.n0;
        tile.group = w.group;
        const i64 rows_here = imin((i64)kBM, p.m - tile.m0) - wg * 64;
        if constexpr (V::kTmaStore) {
          // (rows past m and columns past n are clipped by the map; a warpgroup past m sends nothing)
          if (rows_here > 0)
            K::store_tile_tma(map_out, staging, wg, tid, (int)tile.n0, (int)tile.m0, tile.group, p.n - tile.n0, stores,
                              acc);
        } else {
          O* otile = out + tile_out_offset<2>(p, tile) + wg * 64 * p.out_m;
          K::template store_tile<kBN>(otile, p.out_m, warp * 16 + (lane >> 2), lane, rows_here, p.n - tile.n0, acc,
                                      typename V::Out());
        }
      }
      if (w.resident) ib += (u32)w.k_steps;
    }
    // warpgroup 1 handed warpgroup 0 one turn more than it took: taken here, so that no barrier
    // is left part-way at exit
    if (V::kPingPong && wg == 0 && turns > 0) take_turn(0);
    if constexpr (V::kTmaStore) {
      if (tid == 0) bulk_wait<0>();  // the last stores are done before the kernel ends
    }
  }
};

}  // namespace hopper
}  // namespace ragdot
