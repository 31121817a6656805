// Hopper family (sm_90a): warp-specialized, persistent. One producer warp issues TMA loads of the
// A tile (one 2-D tensor map over the whole lhs) and the B tile (one 3-D tensor map over the whole
// rhs, whose third coordinate is the group) into a ring of shared-memory stages that complete on
// mbarriers; two consumer warpgroups (three for the 192-row tile, below) issue wgmma on them (each
// owns 64 rows of the BM=128 tile; with swapped operands, below, 128 of its columns) and store
// straight from the accumulators.
// The producer runs ahead across tiles, so the next tile's loads overlap the current tile's
// epilogue. setmaxnreg moves registers from the producer to the consumers.
//
// Mode 1 (forward, data gradient): A = token rows (K-major), B = the group's weights; the
// epilogue masks rows at group boundaries.
// Mode 2 (weight gradient, ragged contracting): per group, out[g] = lhs_g^T rhs_g, where the
// group's k range is a run of token rows. A and B are both MN-major (A transposed in wgmma).
// A group's k range starts anywhere, so a k tile can run past the group's end into the next
// group's rows: the consumers zero those rows in shared memory before multiplying.
//
// Gathered A (kGatherA): row i of A is lhs row lhs_rows[i], so A cannot come from a 2-D
// TMA box. The whole producer warpgroup loads it instead, eight lanes per row, with 16-byte
// cp.async copies written at their 128B-swizzled places (the layout TMA would have produced), and
// each thread's copies arrive on the stage's full barrier when they land; B stays a TMA load.
// Rows past the tile's group, past m or with an index outside the table are zero-filled. In CTA
// pairs along n (kGatherPair) each CTA gathers half of the rows and sends it to the other
// (produce_gathered_pair). In mode 2 the gathered rows are k, the token rows the weight gradient
// contracts over: the producer loads each k step's indices afresh (produce_gathered_k).
//
// Cluster pairs (kCluster = 2), along m: two CTAs of a cluster take one 256-row tile of a group
// together, rank r its rows [128 r, 128 r + 128); they need the same B tile, and each loads half
// of it with a TMA multicast into both CTAs' shared memory, which halves B's L2-to-SM traffic. In
// mode 1 (kCrossPairs) the pair takes the next two 128-row tiles of all the groups' tiles in
// order instead, so that a group with an odd tile count leaves no CTA idle; where those two lie
// in different groups, each CTA loads its own B tile whole (Tile::pair_shared).
// Along n (kClusterAlongN): the pair takes a 128 x 2 kBN tile, rank r its columns
// [r kBN, r kBN + kBN); they need the same A tile, and rank r loads its 64-row box r into both
// (for groups of ~128 rows, as in deepseek-v3, where an m pair would leave rank 1 idle). The pair
// runs the same tile sequence in lockstep: rank 0's producer takes the tiles from the counter and
// writes each into both CTAs' tile rings; a stage is refilled only once the consumers of both
// CTAs have released it (empty barriers count every CTA's arrivals). A rank with no rows (no
// columns) in a tile still loads and multicasts its share (in an n pair, rank 1 has none when the
// tile has 64 rows or fewer), and its consumers only keep the barriers' protocol. A 2 x 2 cluster
// (kCluster = 4) does both: rank rm + 2 rn takes rows rm and columns rn of a 256 x 2 kBN tile,
// shares B (multicast halves) with the CTA of the other rows and A (multicast boxes) with the CTA
// of the other columns, so each CTA loads half of the bytes it multiplies.
//
// TMA-store epilogue (kTmaStore, 16-bit outputs): each consumer warpgroup writes its 64 x kBN
// outputs into shared memory one box at a time, two buffers in turn, and one of its threads sends
// each out with a TMA bulk store (the warpgroup writes the next box and goes on to its next tile
// while they drain). Mode 2: boxes of 64 x 64 (whole 128-byte lines); the weight gradient's
// output blocks are as large as its weights (deepseek-v3: 15 GB), and its tiles have only a
// group's few rows of k, so the stores bound it. Mode 1: boxes of 64 rows x 32 columns (half the
// staging, so that four stages still fit beside it), and only for a warpgroup whose 64 rows all
// lie in the tile's group: a box cannot stop at a group boundary, and the rows past it belong to
// the next group's tile; a group's last, partial rows are stored from the registers as usual.
// The register stores send a row's 32 bytes per quad of lanes, eight lines per warp instruction,
// and the warps wait on them while the tensor cores idle; the bulk stores move whole box rows
// from shared memory and let the warpgroup go on.
//
// SwiGLU epilogue (kSwiglu, mode 1, B MN-major, 16-bit outputs): B's columns are [gate | up]
// halves of n, and out is the [m, n / 2] activation. A tile at n0 multiplies gate columns
// [n0 / 2, n0 / 2 + kBN / 2) in its first kBN / 2 columns and the matching up columns
// n / 2 + [n0 / 2, ...) in the rest (b_column), so each consumer thread holds both operands of its
// activations in its accumulators: act = silu(gate) * up, from gate and up rounded to the output
// type first, exactly as ragdot_moe_glu computes SwiGLU from a stored product. Gate boxes that run
// past n / 2 multiply up columns that are never stored; up boxes past n read TMA's zeros.
//
// Rows added into a table (kScatterOut, mode 1): each row of the product, rounded to the output
// type and times row_scales[row], is added in f32 to row out_rows[row] of the table out points at
// (an index outside it drops the row), with 16-byte vector reductions (red.global.add.v4.f32)
// straight from the accumulators, four adjacent columns per lane as store_tile arranges them. An
// MoE layer's down projection adds every expert row into its token's output this way, so the
// [T k, H] rows are never written and read back by a combine kernel; the additions into one
// token's row come from several tiles in no fixed order.
//
// Last wave split along k (kSplitTail, mode 1, one CTA per tile): the tile counter hands out
// units of work (split.h) instead of tiles, and the last wave's few tiles come as pieces, each a
// run of the tile's k steps. A consumer warpgroup with rows in a piece writes its partial sums to
// the piece's slot of the workspace and counts itself in on the tile's counter; the last to arrive
// adds the slots in piece order and runs the epilogue (store, SwiGLU or table rows) as for a
// whole tile. No piece waits for another.
//
// Overlapped stores (kOverlapStore, mode 1, the plain epilogue, 16-bit outputs): a consumer
// warpgroup rounds its finished tile's accumulators to 16-bit words (half their registers) and
// stores them only once its next tile's first two k steps are issued, so that the register stores
// run while the tensor cores multiply; otherwise both warpgroups store together, and the tensor
// cores wait for them at every tile's end. The last tile's words are stored after the loop.
//
// Three consumer warpgroups (kConsumers = 3, plain mode 1 on one CTA): a tile of 192 rows by up
// to 192 columns, each warpgroup 64 rows, on 512 threads. Every k step of a 128 x 256 tile brings
// 48 KiB into the SM for 4.2 MFLOP; 192 x 192 brings the same 48 KiB for 4.7 MFLOP, so the rate
// at which L2 feeds an SM (about 41-44 bytes per clock measured on every kernel, against the 47
// a 128 x 256 tile needs at the tensor cores' full rate) no longer holds the tensor cores back.
// Fewer registers per consumer (152 after setmaxnreg) hold its 96 accumulators.
//
// Shared memory: [scheduler table][pad to 1024][stage 0: A | B][stage 1] ... [staging]. Every tile
// is stored 128B-swizzled as TMA writes it and wgmma reads it; 1024-byte alignment keeps the
// swizzle pattern anchored.
//
// Swapped operands (kSwapAB, mode 1, 16-bit outputs): out^T = W^T x^T. A tile is up to 160 token
// rows by 256 columns; each consumer warpgroup takes 128 of the columns as two 64-wide slices of
// wgmma's M (its A: the weight boxes, MN- or K-major as stored), and the tile's rows are wgmma's N
// (its B: the token rows, K-major, loaded in TMA boxes of 32 rows), rounded up to 16. Each N has a
// k loop of its own (a choice of instruction inside the loop makes ptxas serialize the pipeline).
// The epilogue turns each 8 x 8 block of the accumulators back with movmatrix.trans. A group of up
// to 160 rows reads its weight tile once and multiplies at most 15 rows for nothing. In m pairs
// (kCluster = 2) the pair's two tiles, consecutive in the groups' order, share the weight tile
// when they lie in one group (a large group's), as the plain tile's m pairs share B.
//
// The generated prelude defines `struct V` with kMode, kBN, kConsumers, kStages, kBKMajor, kGatherA, kCluster,
// kClusterAlongN, kTmaStore, kSwiglu, kScatterOut, kSplitTail, kSwapAB, kStrips (wgmma_strips.cuh's
// kernel, whose entry point is Strips<V, Mma>::run), kPingPong, kOverlapStore, typedef In, typedef Out,
// and `struct Mma` with `run(float (&d)[kBN / 2], u64 desc_a, u64 desc_b, int accumulate)`: the one
// wgmma instruction of the variant (m64 x kBN x k16), written out by the generator; with kSwapAB
// instead kMaxRows (160), kRowStep (16) and `template <int kN> run(float (&d)[160], u64 desc_a0,
// u64 desc_a1, u64 desc_b)`: both slices' m64 x kN x k16 instructions.
#pragma once

#include "ragdot/schedule.cuh"
#include "ragdot/split.h"

namespace ragdot {
namespace hopper {

// A CUtensorMap as the kernel sees it: 128 opaque bytes, 64-byte aligned.
struct __align__(64) TensorMap {
  u64 opaque[16];
};

__device__ __forceinline__ void mbar_init(u32 bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// The spin on mbarrier.try_wait.parity, with the wait's semantics as `sem` ("" or ".acquire.cluster").
#define RAGDOT_MBAR_WAIT_LOOP(sem)                                 \
  "{\n"                                                            \
  ".reg .pred done;\n"                                             \
  "WAIT:\n"                                                        \
  "mbarrier.try_wait.parity" sem ".shared::cta.b64 done, [%0], %1;\n" \
  "@!done bra WAIT;\n"                                             \
  "}\n"
// Waits until the phase of parity `parity` has completed (a fresh barrier counts parity 1 as done).
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
  asm volatile(RAGDOT_MBAR_WAIT_LOOP("") ::"r"(bar), "r"(parity) : "memory");
}

__device__ __forceinline__ void tma_load_2d(u32 dst, const TensorMap* map, u32 bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(
          dst),
      "l"(map), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}
// The 2-D load of one box into the same shared-memory offset of every CTA in `cta_mask`,
// completing bytes on the barrier at the same offset in each of them.
__device__ __forceinline__ void tma_load_2d_multicast(u32 dst, const TensorMap* map, u32 bar, int c0, int c1,
                                                      u16 cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%3, "
      "%4}], [%2], %5;\n" ::"r"(dst),
      "l"(map), "r"(bar), "r"(c0), "r"(c1), "h"(cta_mask)
      : "memory");
}
__device__ __forceinline__ void tma_load_3d(u32 dst, const TensorMap* map, u32 bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
      "[%2];\n" ::"r"(dst),
      "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
// The 3-D form of tma_load_2d_multicast.
__device__ __forceinline__ void tma_load_3d_multicast(u32 dst, const TensorMap* map, u32 bar, int c0, int c1, int c2,
                                                      u16 cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%3, "
      "%4, %5}], [%2], %6;\n" ::"r"(dst),
      "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "h"(cta_mask)
      : "memory");
}

// Clusters. A shared-memory address of this CTA (32 bits) names the same place in another CTA of
// the cluster once mapped with cluster_address; remote arrivals and stores then go through it.
__device__ __forceinline__ u32 cluster_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ u32 cluster_address(u32 addr, u32 rank) {
  u32 r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
// Arrival on a barrier of another CTA that orders this thread's earlier accesses, and those it has
// seen through barriers, for the waiters there (the tile ring: a slot's value, a slot's reads).
// Costs a GPU-wide fence: once per tile and CTA, from a producer thread only.
__device__ __forceinline__ void mbar_arrive_cluster(u32 cluster_bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_bar) : "memory");
}
// Arrival on a barrier of another CTA that orders nothing but itself (a release at cluster scope
// costs a GPU-wide fence, which would wait for the epilogue's stores): for a stage's release, whose
// wgmma reads are complete (wgmma.wait_group) and whose next writes come through the async proxy.
__device__ __forceinline__ void mbar_arrive_remote(u32 cluster_bar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_bar) : "memory");
}
// mbar_wait for barriers that other CTAs of the cluster arrive on: their writes before arriving
// are visible after it.
__device__ __forceinline__ void mbar_wait_cluster(u32 bar, u32 parity) {
  asm volatile(RAGDOT_MBAR_WAIT_LOOP(".acquire.cluster") ::"r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ void st_cluster(u32 cluster_addr, int value) {
  asm volatile("st.shared::cluster.u32 [%0], %1;\n" ::"r"(cluster_addr), "r"(value) : "memory");
}
// Every thread of every CTA in the cluster (threads may arrive from divergent code).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive;\nbarrier.cluster.wait;\n" ::: "memory");
}

// TMA bulk stores of one box from shared memory; they complete in this thread's bulk group.
__device__ __forceinline__ void tma_store_2d(const TensorMap* map, u32 src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(map), "r"(src),
               "r"(c0), "r"(c1)
               : "memory");
}
__device__ __forceinline__ void tma_store_3d(const TensorMap* map, u32 src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(map),
               "r"(src), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// `bytes` (a multiple of 16) of this CTA's shared memory at `src` into another CTA of the cluster
// (`dst`, `bar`: addresses mapped with cluster_address), completing the bytes on its barrier.
__device__ __forceinline__ void bulk_copy_to_cluster(u32 dst, u32 src, u32 bytes, u32 bar) {
  asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   dst),
               "r"(src), "r"(bytes), "r"(bar)
               : "memory");
}
// Waits until this thread's bulk groups but the newest N have read their shared memory.
template <int N> __device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
// Waits until this thread's bulk groups but the newest N are complete (their writes done).
template <int N> __device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}
// Orders this thread's generic-proxy shared-memory writes before later async-proxy reads (wgmma).
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// 16 bytes global -> shared, asynchronously; `bytes` of them read (0..16), the rest zero-filled.
__device__ __forceinline__ void cp_async_16(u32 dst, const void* src, u32 bytes) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
// One arrival on `bar` once this thread's earlier cp.async copies have landed (counted in the
// barrier's expected arrivals: noinc).
__device__ __forceinline__ void cp_async_arrive(u32 bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
// Global accesses cached in L2 only: a split tile's partial sums, written on one SM and read on
// another, must not come from a stale L1 line.
__device__ __forceinline__ void st_global_cg(float* p, float v) {
  asm volatile("st.global.cg.f32 [%0], %1;\n" ::"l"(p), "f"(v) : "memory");
}
__device__ __forceinline__ float ld_global_cg(const float* p) {
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];\n" : "=f"(v) : "l"(p) : "memory");
  return v;
}
// Four 8 x 8 matrices of 16-bit words into shared memory, one instruction per warp: lanes 8i..8i+7
// give the addresses of matrix i's eight 16-byte rows, and each lane's register i holds its two
// words of matrix i at row lane / 4, columns 2 (lane % 4) and + 1: the accumulators' own layout.
__device__ __forceinline__ void stmatrix_x4(u32 addr, u32 m0, u32 m1, u32 m2, u32 m3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(m0), "r"(m1),
               "r"(m2), "r"(m3)
               : "memory");
}
// The transpose of an 8 x 8 matrix of 16-bit values held across a warp, two per lane (lane l:
// row l / 4, columns 2 (l % 4) and + 1, the lower column in the lower half); the result in the
// same layout.
__device__ __forceinline__ u32 movmatrix_trans(u32 x) {
  u32 y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}
// Barrier 1 over the two consumer warpgroups (barrier 0 is __syncthreads).
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, 256;\n" ::: "memory"); }
// Barriers 2 and 3: one consumer warpgroup (wg 0 or 1) alone.
__device__ __forceinline__ void warpgroup_sync(int wg) { asm volatile("bar.sync %0, 128;\n" ::"r"(2 + wg) : "memory"); }

__device__ __forceinline__ void prefetch_map(const TensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accumulator accesses across the asynchronous wgmma window.
__device__ __forceinline__ void fence_operand(float& x) { asm volatile("" : "+f"(x)::"memory"); }

template <int kRegs> __device__ __forceinline__ void regs_dealloc() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs> __device__ __forceinline__ void regs_alloc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// Shared-memory matrix descriptor, 128-byte swizzle. Offsets in bytes.
//   K-major tiles (rows of 64 elements = 128 bytes along k): leading offset unused, stride
//   offset = 1024 (from one 8-row group to the next); stepping k by 16 adds 32 bytes.
//   MN-major tiles (TMA boxes of 64 n x kBK k rows): leading offset = bytes from one 64-wide
//   n chunk to the next, stride offset = 1024 (from one 8-k group to the next).
__device__ __forceinline__ u64 smem_desc(u32 addr, u32 leading_bytes, u32 stride_bytes) {
  u64 d = 0;
  d |= (u64)((addr & 0x3FFFF) >> 4);
  d |= (u64)((leading_bytes >> 4) & 0x3FFF) << 16;
  d |= (u64)((stride_bytes >> 4) & 0x3FFF) << 32;
  d |= (u64)1 << 62;  // 128-byte swizzle
  return d;
}

// The tile indices in flight from the producer to the consumers (-1 ends the stream), with a
// full/empty mbarrier pair per slot. One per CTA, at a fixed shared-memory address.
constexpr int kTileSlots = 4;  // tile indices the producer may hand out ahead of the consumers
struct TileRing {
  int slot[kTileSlots];
  u64 full[kTileSlots], empty[kTileSlots];
};
__shared__ __align__(8) TileRing tile_ring;
// kSplitTail: how the units of work split the tiles (thread 0 works it out once per CTA), and
// each consumer warpgroup's count of the pieces that arrived before it on a split tile.
__shared__ RagdotSplit tile_split;
__shared__ int split_arrivals[2];

template <class V, class Mma>
struct Kernel {
  // swapped operands: a tile's token rows are wgmma's N (up to 160), its 256 columns two 64-wide
  // slices of M per consumer warpgroup
  static constexpr bool kSwap = V::kSwapAB;
  // consumer warpgroups of 64 rows each: two, or three for the 192-row tile, whose 192 x 192
  // outputs take fewer operand bytes per multiply than 128 x 256 (see the header)
  static constexpr int kConsumers = V::kConsumers;
  static constexpr int kBM = kSwap ? 160 : 64 * kConsumers, kBN = V::kBN, kBK = 64, kStages = V::kStages;
  static constexpr int kThreads = 128 * (1 + kConsumers);  // warpgroup 0: producer; then the consumers
  static constexpr int kATileBytes = kBM * kBK * 2, kBTileBytes = kBN * kBK * 2;
  static constexpr int kStageBytes = kATileBytes + kBTileBytes;
  // f32 accumulators per consumer thread: 64 x kBN / 128, or with swapped operands two slices of
  // 64 columns x up to kBM rows
  static constexpr int kAcc = kSwap ? kBM : kBN / 2;
  static constexpr int kSwapBox = 32;   // swapped operands: A's rows come in boxes of 32,
  static constexpr int kSwapStep = 16;  // and wgmma's N in steps of 16
  static_assert(kBN % 64 == 0 && kBN <= 256, "tile n");
  static_assert(V::kMode == 1 || (V::kMode == 2 && !V::kBKMajor), "mode 2 reads both operands MN-major");
  static constexpr int kCluster = V::kCluster;
  static constexpr bool kPairM = kCluster == 4 || (kCluster == 2 && !V::kClusterAlongN);  // split rows, share B
  static constexpr bool kPairN = kCluster == 4 || (kCluster == 2 && V::kClusterAlongN);   // split columns, share A
  // gathered rows in n pairs: each CTA gathers half of the tile's rows and sends them to the other
  static constexpr bool kGatherPair = V::kGatherA && kCluster == 2 && V::kClusterAlongN;
  static_assert(!V::kGatherA || V::kMode == 1 || (V::kCluster == 1 && !V::kSplitTail),
                "gathered rows in mode 2: one CTA per tile");
  static_assert(kCluster == 1 || ((kCluster == 2 || kCluster == 4) && (!V::kGatherA || kGatherPair) &&
                                  (kBN % 128 == 0 || !kPairM)),
                "m pairs split B's boxes evenly; gathered rows pair only along n");
  // (a gathered pair's protocol holds with two stages too: the sending warp waits on nothing but
  // its CTA's gathering, and a consumer's release of stage i needs only the full barrier of i + 1;
  // the GPU tests have run it with three or more, so the planner and the override ask for three)
  static_assert(!V::kTmaStore || (sizeof(typename Storage<typename V::Out>::type) == 2 &&
                                   (V::kMode == 2 || (V::kCluster == 1 && !V::kSplitTail && !V::kSwapAB))),
                "the TMA-store epilogue: 16-bit outputs; in mode 1 the plain epilogue on one CTA per tile");
  static_assert(!V::kSwiglu || (V::kMode == 1 && !V::kBKMajor && kBN % 128 == 0 &&
                                sizeof(typename Storage<typename V::Out>::type) == 2 && !V::kTmaStore),
                "the SwiGLU epilogue: mode 1, MN-major B in boxes of 64 columns, half a tile each of gate and up, "
                "16-bit outputs");
  static_assert(!V::kScatterOut || (V::kMode == 1 && !V::kTmaStore && !V::kSwiglu),
                "rows added into a table: mode 1, an epilogue of its own");
  static_assert(!V::kSplitTail || (V::kMode == 1 && V::kCluster == 1), "split tiles: mode 1, one CTA per tile");
  static_assert(!kSwap || (V::kMode == 1 && kBN == 256 && (V::kCluster == 1 || (kCluster == 2 && kPairM)) &&
                           !V::kGatherA && !V::kSwiglu && !V::kScatterOut && !V::kTmaStore && !V::kSplitTail &&
                           sizeof(typename Storage<typename V::Out>::type) == 2),
                "swapped operands: plain mode 1, 256 columns, one CTA per tile or m pairs, 16-bit outputs");
  static constexpr bool kOverlap = V::kOverlapStore;
  static_assert(!kOverlap || (V::kMode == 1 && !kSwap && !V::kSplitTail && !V::kTmaStore && !V::kScatterOut &&
                              !V::kSwiglu && sizeof(typename Storage<typename V::Out>::type) == 2),
                "overlapped stores: the plain mode 1 epilogue with 16-bit outputs");
  static_assert(kConsumers == 2 || (kConsumers == 3 && V::kMode == 1 && kCluster == 1 && !V::kGatherA && !kSwap &&
                                    !V::kSwiglu && !V::kScatterOut && !V::kSplitTail && !V::kTmaStore && !kOverlap &&
                                    kBN <= 192),
                "three consumer warpgroups: the plain mode 1 tile on one CTA, at most 192 columns");
  // The CTA's registers, as __launch_bounds__(kThreads, 1) gives them (a multiple of 8 per thread:
  // 168 for 384 threads, 128 for 512), moved from the producer to the consumers by setmaxnreg
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
  static constexpr int kProducerRegs = kOverlap ? 40 : 56;
  static constexpr int kConsumerRegs = kConsumers == 3 ? 152 : kOverlap ? 232 : 224;
  static_assert(128 * kProducerRegs + 128 * kConsumers * kConsumerRegs <= kThreads * kLaunchRegs, "the CTA's registers");
  // TMA-store epilogue: per warpgroup kStoreBuffers buffers (two unless the variant asks for more
  // boxes in flight) of one box of 64 rows x kStoreBoxCols 16-bit outputs (mode 2: 8 KiB, 128-byte
  // swizzle; mode 1: 4 KiB, 64-byte swizzle)
  static constexpr int kStoreBoxCols = V::kMode == 1 ? 32 : 64;
  static constexpr int kStagingBytes = V::kTmaStore ? 2 * V::kStoreBuffers * 64 * kStoreBoxCols * 2 : 0;
  static_assert(!V::kTmaStore || (V::kStoreBuffers >= 2 && V::kStoreBuffers <= 4), "the TMA-store buffers");
  // A cluster's tiles are 256 x kBN (pairs along m), 128 x 2 kBN (along n) or 256 x 2 kBN (2 x 2):
  // the scheduler hands out those.
  // Mode 1's m pairs take their two tiles from all the groups' m tiles in order (schedule.cuh's
  // kPairRows): a pair may span two groups, and then shares no loads, rather than leave a CTA idle
  // at each group with an odd number of tiles. They hand out tiles in the plain order only.
  static constexpr bool kCrossPairs = kPairM && kCluster == 2 && V::kMode == 1;
  typedef Scheduler<V::kMode, kBM * (kPairM && !kCrossPairs ? 2 : 1), kBN * (kPairN ? 2 : 1), kThreads,
                    /*kMixable=*/!kCrossPairs, /*kPairRows=*/kCrossPairs>
      Sched;
  typedef typename Storage<typename V::Out>::type O;

  // The threads that take every tile from the ring: the consumers, and with gathered A the
  // producer warpgroup's 128 threads too (in a cluster gathered A comes only in n pairs).
  static constexpr int kTileReaders = 128 * kConsumers + (V::kGatherA ? 128 : 0);
  // Cluster: each CTA's slots are read by those threads and, on ranks past 0 (a gathered pair's
  // aside), by the producer thread; each arrives once on its own CTA's empty barrier, as in one
  // CTA, so that every reader's read is ordered before the next store into the slot by its own
  // arrival. Rank 0 writes every CTA's slots, so its empty barrier also counts one relayed
  // arrival per other CTA (relay_tile_slot).
  static __device__ __forceinline__ u32 cluster_tile_readers(u32 rank) {
    return rank == 0 ? kTileReaders + kCluster - 1 : kTileReaders + (kGatherPair ? 0 : 1);
  }
  // A gathered pair's producer warpgroup: warp 0 takes the tiles and loads B, warps 1 and 2
  // gather this CTA's half of the rows (kGatherThreads threads, eight rows each), warp 3 sends
  // that half to the other CTA once it has landed.
  static constexpr int kGatherThreads = kGatherPair ? 64 : 128;

  // A CTA's place in its cluster: its rows (rm) and columns (rn) of the cluster's tile (rank =
  // rm + 2 rn in a 2 x 2 cluster), and the CTAs it shares B with (the other rows, same columns)
  // and A with (the other columns, same rows).
  static __device__ __forceinline__ u32 rank_m(u32 rank) { return kPairM ? (rank & 1) : 0; }
  static __device__ __forceinline__ u32 rank_n(u32 rank) { return kPairN ? (kPairM ? rank >> 1 : rank) : 0; }
  static __device__ __forceinline__ u32 b_sharer(u32 rank) { return rank ^ 1; }
  static __device__ __forceinline__ u32 a_sharer(u32 rank) { return kPairM ? rank ^ 2 : rank ^ 1; }

  static __device__ __forceinline__ void run(const RagdotKernelParams& p, const TensorMap* map_a,
                                             const TensorMap* map_b, unsigned char* smem,
                                             const TensorMap* map_out = nullptr) {
    __shared__ i64 scan_scratch[33];
    __shared__ __align__(8) u64 full_bar[kStages], empty_bar[kStages];
    // a gathered pair: this CTA's half of a stage's rows has landed (its gathering threads' arrivals)
    __shared__ __align__(8) u64 gathered_bar[kGatherPair ? kStages : 1];
    Sched sched;
    sched.init(p, 0, (int*)smem, scan_scratch);
    const u32 table_end = smem_address(smem) + (u32)Sched::smem_bytes(p.num_groups, p.computed_groups);
    const u32 ring = (table_end + 1023u) & ~1023u;

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (threadIdx.x == 0) {
      for (int s = 0; s < kStages; ++s) {
        // the producer's expect_tx, plus with gathered A one cp.async arrival per gathering thread
        mbar_init(smem_address(&full_bar[s]), V::kGatherA ? 1 + kGatherThreads : 1);
        if (kGatherPair) mbar_init(smem_address(&gathered_bar[s]), kGatherThreads);
        // one arrival per consumer warpgroup of every CTA of the cluster. Counting only the CTAs
        // that write into this one's stages (its sharers) is not enough in a 2 x 2 cluster: the
        // diagonal CTA, when it has neither rows nor columns, receives no bytes that would hold it
        // back, runs a ring ahead, and its arrivals stand in for a slower CTA's at the sharers'
        // barriers, which then refill stages that CTA still reads.
        mbar_init(smem_address(&empty_bar[s]), kConsumers * kCluster);
      }
      for (int s = 0; s < kTileSlots; ++s) {
        mbar_init(smem_address(&tile_ring.full[s]), 1);
        // every reader thread, once it has read the slot (in a cluster, plus the other CTAs' relays)
        mbar_init(smem_address(&tile_ring.empty[s]), kCluster == 1 ? kTileReaders : cluster_tile_readers(cluster_rank()));
      }
      if constexpr (V::kSplitTail)
        tile_split = ragdot_split_plan((int)sched.total_tiles, sched.compute_tiles(), (int)gridDim.x,
                                       (int)ceil_div(p.k, kBK), RAGDOT_SPLIT_MAX_PIECES);
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
      if (!V::kGatherA) prefetch_map(map_a);
      prefetch_map(map_b);
      if (V::kTmaStore) prefetch_map(map_out);
    }
    // a cluster's barriers are signalled from its other CTAs: all must be initialized before any starts
    if (kCluster > 1) cluster_sync();
    else __syncthreads();

    if (warp < 4) {
      // 128 x 56 + 256 x 224 = the 384 x 168 registers the CTA was given; overlapped stores hold a
      // tile's words beside the accumulators, so their consumers take 232 and the producer 40;
      // three consumer warpgroups: 128 x 56 + 384 x 152 = 512 x 128
      regs_dealloc<kProducerRegs>();
      if constexpr (kGatherPair) produce_gathered_pair(p, sched, map_b, ring, full_bar, empty_bar, gathered_bar);
      else if constexpr (V::kGatherA && V::kMode == 2) produce_gathered_k(p, sched, map_b, ring, full_bar, empty_bar);
      else if constexpr (V::kGatherA) produce_gathered(p, sched, map_b, ring, full_bar, empty_bar);
      else if (warp == 0 && lane == 0) produce(p, sched, map_a, map_b, ring, full_bar, empty_bar);
    } else {
      regs_alloc<kConsumerRegs>();
      consume(p, sched, ring, full_bar, empty_bar, (threadIdx.x - 128) >> 7, map_out);
    }
    // no CTA of a cluster leaves while another may still arrive on its barriers
    if (kCluster > 1) cluster_sync();
  }

  // This CTA's rows and columns of unit t's tile (in a cluster, its share of the cluster's tile).
  static __device__ __forceinline__ Tile cta_tile(const RagdotKernelParams& p, const Sched& sched, int t, u32 rank) {
    if constexpr (kCrossPairs) {
      return sched.cta_tile(p, t, rank_m(rank));
    } else {
      Tile tile = sched.tile(p, t);
      tile.m0 += rank_m(rank) * kBM;
      tile.n0 += rank_n(rank) * kBN;
      return tile;
    }
  }

  // A unit of work from the tile counter: its tile and, with kSplitTail, its piece and slot (split.h;
  // slot -1: the whole tile).
  struct Unit {
    int tile, piece, slot;
  };
  static __device__ __forceinline__ Unit unit_of(int u) {
    Unit w = {u, 0, -1};
    if constexpr (V::kSplitTail) ragdot_split_unit(&tile_split, u, &w.tile, &w.piece, &w.slot);
    return w;
  }
  // The k steps [begin, end) a unit runs of its tile's k_steps.
  static __device__ __forceinline__ void unit_k_steps(const Unit& w, int k_steps, int& begin, int& end) {
    begin = 0, end = k_steps;
    if constexpr (V::kSplitTail) {
      if (w.slot >= 0) ragdot_split_k_steps(k_steps, w.piece, tile_split.pieces, &begin, &end);
    }
  }

  // Producer side (rank 0 of a cluster): the n-th unit of work (a tile, unless kSplitTail) this
  // CTA (cluster) runs, or -1 at the end.
  static __device__ __forceinline__ int next_tile(const RagdotKernelParams& p, const Sched& sched, u32 n) {
    TileRing& r = tile_ring;
    const i64 t = atomicAdd(p.tile_counter, 1);  // the host always gives this family a counter
    const i64 units = V::kSplitTail ? (i64)tile_split.total : sched.total_tiles;
    const int value = t < units ? (int)t : -1;
    const u32 s = n % kTileSlots, phase = (n / kTileSlots) & 1;
    if (kCluster == 1) {
      mbar_wait(smem_address(&r.empty[s]), phase ^ 1);
      r.slot[s] = value;
      mbar_arrive(smem_address(&r.full[s]));  // release: the slot's value is visible to the waiting consumers
      return value;
    }
    mbar_wait_cluster(smem_address(&r.empty[s]), phase ^ 1);
    r.slot[s] = value;
    mbar_arrive(smem_address(&r.full[s]));
#pragma unroll
    for (u32 peer = 1; peer < kCluster; ++peer) {
      st_cluster(cluster_address(smem_address(&r.slot[s]), peer), value);
      mbar_arrive_cluster(cluster_address(smem_address(&r.full[s]), peer));  // release: orders the remote store
    }
    return value;
  }
  // Reader side (each reader thread, and the producer thread of a cluster's other ranks): the n-th
  // tile, or -1 at the end. In a cluster rank 0 writes the slot from another CTA, so the wait
  // acquires at cluster scope.
  static __device__ __forceinline__ int take_tile(u32 n) {
    TileRing& r = tile_ring;
    const u32 s = n % kTileSlots, phase = (n / kTileSlots) & 1;
    if constexpr (kCluster == 1) mbar_wait(smem_address(&r.full[s]), phase);
    else mbar_wait_cluster(smem_address(&r.full[s]), phase);
    const int t = *(volatile int*)&r.slot[s];
    mbar_arrive(smem_address(&r.empty[s]));
    return t;
  }
  // A cluster's rank past 0, its producer thread at the n-th tile (produce's after taking it, a
  // gathered pair's before; produce's after taking -1 is an arrival nobody waits for):
  // once this CTA's own readers have all read the slot of tile n - (kTileSlots - 1), tells rank 0
  // that it may write that slot again. The readers' arrivals are CTA-local; this one arrival per
  // tile is the release at cluster scope that orders their reads before rank 0's next store, at
  // the price of one fence per tile on a thread that has no stores in flight (a release per
  // reader warp would wait for the epilogue's stores). Three tiles back the readers have normally
  // long read it, and rank 0 needs the slot only for tile n + 1. Three is also the most it may be
  // after the take: four back, rank 0 would wait for this relay to write the very tile taken
  // before it (tests/cpp/test_tile_ring_protocol.cpp plays both orders and their limits out).
  static __device__ __forceinline__ void relay_tile_slot(u32 n) {
    if (n < kTileSlots - 1) return;
    const u32 done = n - (kTileSlots - 1), s = done % kTileSlots, phase = (done / kTileSlots) & 1;
    TileRing& r = tile_ring;
    mbar_wait(smem_address(&r.empty[s]), phase);
    mbar_arrive_cluster(cluster_address(smem_address(&r.empty[s]), 0));
  }

  // The rhs column where B box j (64 columns) of the tile at n0 starts: n0 + 64 j, or with the
  // SwiGLU epilogue the j-th of the tile's gate boxes, then of its up boxes (half_n = n / 2).
  static __device__ __forceinline__ int b_column(int n0, int j, int half_n) {
    if constexpr (!V::kSwiglu) {
      return n0 + j * 64;
    } else {
      constexpr int kHalfBoxes = kBN / 128;
      const int c = n0 / 2 + (j % kHalfBoxes) * 64;
      return j < kHalfBoxes ? c : half_n + c;
    }
  }

  // B's tile for one stage. With m pairs, the CTA of rows rm loads half rm of the boxes (or of the
  // one K-major box's rows: the tensor map's box is kBN / 2 rows then) into itself and its B
  // sharer; otherwise, or where the pair's CTAs multiply different groups (!shared), all of it here.
  static __device__ __forceinline__ void load_b(u32 b_dst, const TensorMap* map_b, u32 full, int n0, int k0, int group,
                                                u32 rank, int half_n, bool shared = true) {
    constexpr int kBoxes = kBN / 64 / (kPairM ? 2 : 1);  // boxes of 64 n x kBK k this CTA loads (MN-major B)
    const u32 rm = rank_m(rank);
    const u16 sharers = (u16)((1u << rank) | (1u << b_sharer(rank)));
    // m pairs that share B split its boxes between their two CTAs; a pair spanning two groups
    // (!shared) loads each CTA's B whole
    const bool split = kPairM && (shared || !kCrossPairs);
    if constexpr (V::kBKMajor) {
      if constexpr (!kPairM) {
        tma_load_3d(b_dst, map_b, full, k0, n0, group);
      } else if (split) {
        tma_load_3d_multicast(b_dst + rm * (kBN / 2 * 128), map_b, full, k0, n0 + (int)rm * (kBN / 2), group, sharers);
      } else {
#pragma unroll 1  // (the map's box is kBN / 2 rows here; unrolled, the producer spilled)
        for (int h = 0; h < 2; ++h) tma_load_3d(b_dst + h * (kBN / 2 * 128), map_b, full, k0, n0 + h * (kBN / 2), group);
      }
    } else if constexpr (!kPairM && V::kMode == 2) {
#pragma unroll
      for (int j = 0; j < kBoxes; ++j) tma_load_3d(b_dst + j * (kBK * 128), map_b, full, b_column(n0, j, half_n), k0, group);
    } else {
      const int first = split ? (int)rm * kBoxes : 0, count = split ? kBoxes : kBN / 64;
#pragma unroll 1  // unrolled, the four boxes' addresses would outgrow the producer's 56 registers
      for (int j = first; j < first + count; ++j) {
        const int column = b_column(n0, j, half_n);
        if (split) tma_load_3d_multicast(b_dst + j * (kBK * 128), map_b, full, column, k0, group, sharers);
        else tma_load_3d(b_dst + j * (kBK * 128), map_b, full, column, k0, group);
      }
    }
  }
  // A's 64-row box `box` (rows m0 + 64 box.., one per consumer warpgroup) for one stage: with n
  // pairs, the CTA of columns rn = `box` loads it into itself and its A sharer, the other nothing.
  static __device__ __forceinline__ void load_a_box(u32 a_dst, const TensorMap* map_a, u32 full, int m0, int k0,
                                                    int box, u32 rank) {
    const u32 dst = a_dst + box * (64 * 128);
    // mode 1: dims (k, m); mode 2: dims (m, k)
    const int c0 = V::kMode == 2 ? m0 + 64 * box : k0, c1 = V::kMode == 2 ? k0 : m0 + 64 * box;
    if constexpr (!kPairN) tma_load_2d(dst, map_a, full, c0, c1);
    else if ((int)rank_n(rank) == box)
      tma_load_2d_multicast(dst, map_a, full, c0, c1, (u16)((1u << rank) | (1u << a_sharer(rank))));
  }

  static __device__ __forceinline__ void produce(const RagdotKernelParams& p, const Sched& sched,
                                                 const TensorMap* map_a, const TensorMap* map_b, u32 ring,
                                                 const u64* full_bars, const u64* empty_bars) {
    // shared-memory addresses (32 bits) rather than generic pointers: fewer registers
    const u32 full_bar = smem_address(full_bars), empty_bar = smem_address(empty_bars);
    const u32 rank = kCluster > 1 ? cluster_rank() : 0;
    const int half_n = V::kSwiglu ? (int)(p.n / 2) : 0;
    u32 it = 0;
    for (u32 n = 0;; ++n) {
      const int t = rank == 0 ? next_tile(p, sched, n) : take_tile(n);
      if (rank != 0) relay_tile_slot(n);  // (after the take: before it, ptxas spilled here)
      if (t < 0) break;
      // 32-bit coordinates only: the producer runs on 56 registers (setmaxnreg)
      int m0, n0, k_begin, group, kt_begin, kt_end;
      int a_boxes = 0;  // swapped operands: A's boxes of kSwapBox rows the tile needs
      bool a_lower, a_upper, has_cols, b_shared;
      bool a_third = false;  // three consumer warpgroups: A's third box
      {
        const Unit w = unit_of(t);
        const Tile tile = cta_tile(p, sched, w.tile, rank);  // this CTA's rows and columns
        if (tile.zero) continue;
        m0 = (int)tile.m0;
        n0 = (int)tile.n0;
        has_cols = !kPairN || n0 < p.n;
        b_shared = tile.pair_shared;
        k_begin = (int)tile.k_begin;
        group = tile.group;
        unit_k_steps(w, (int)ceil_div(tile.k_len, kBK), kt_begin, kt_end);
        // Mode 1: A comes in boxes of 64 rows, one per consumer warpgroup; the second (and third) only
        // when the tile has rows there (a group's last tile often has 64 or fewer, and its second
        // warpgroup idles), which spares L2 the unused half. Mode 2: both, if the CTA has rows.
        // In an m pair, a rank may have no rows at all: it loads no A, only its half of B. In an n
        // pair, one with no columns loads no B, only its box of A.
        const bool has_rows = !kPairM || tile.row_end - m0 > 0;  // one CTA: a tile always has rows
        a_lower = has_rows;
        a_upper = V::kMode == 2 ? has_rows : tile.row_end - m0 > 64;
        if constexpr (kConsumers == 3) a_third = tile.row_end - m0 > 128;
        if constexpr (kSwap) a_boxes = (int)ceil_div(imin((i64)kBM, tile.row_end - m0), kSwapBox);
      }
      // (an n pair's A boxes land in both CTAs, whichever rank loads them)
      const u32 stage_bytes =
          kSwap ? kBTileBytes + (u32)a_boxes * (kSwapBox * 128)
                : (has_cols ? kBTileBytes : 0) + (a_lower ? 64 * 128 : 0) + (a_upper ? 64 * 128 : 0) +
                      (a_third ? 64 * 128 : 0);
      for (int kt = kt_begin; kt < kt_end; ++kt, ++it) {
        const u32 s = it % kStages, phase = (it / kStages) & 1;
        const u32 full = full_bar + 8 * s;
        // (in a cluster the other CTAs' consumers arrive here too)
        mbar_wait(empty_bar + 8 * s, phase ^ 1);
        mbar_expect_tx(full, stage_bytes);
        const u32 a_dst = ring + s * kStageBytes, b_dst = a_dst + kATileBytes;
        const int k0 = k_begin + kt * kBK;
        if (V::kMode == 2) {
          // lhs rows are k, columns m: two boxes of 64 m x 64 k, one per consumer warpgroup;
          // rhs rows are k, columns n (a single "group" in the map)
          if (a_lower) load_a_box(a_dst, map_a, full, m0, k0, 0, rank);
          if (a_upper) load_a_box(a_dst, map_a, full, m0, k0, 1, rank);
          if (has_cols) load_b(b_dst, map_b, full, n0, k0, 0, rank, 0);
          continue;
        }
        if constexpr (kSwap) {
#pragma unroll 1
          for (int box = 0; box < a_boxes; ++box)
            tma_load_2d(a_dst + box * (kSwapBox * 128), map_a, full, k0, m0 + box * kSwapBox);
          load_b(b_dst, map_b, full, n0, k0, group, rank, half_n, b_shared);
          continue;
        }
        if (a_lower) load_a_box(a_dst, map_a, full, m0, k0, 0, rank);
        if (a_upper) load_a_box(a_dst, map_a, full, m0, k0, 1, rank);
        if (a_third) load_a_box(a_dst, map_a, full, m0, k0, 2, rank);
        if (has_cols) load_b(b_dst, map_b, full, n0, k0, group, rank, half_n, b_shared);
      }
    }
  }

  // Gathered A: the producer warpgroup's 128 threads load a stage's 128 rows x 128 bytes as 16-byte
  // pieces, eight lanes per row so that one warp instruction reads four whole 128-byte lines:
  // thread i takes piece c = i % 8 of rows i / 8 + 16 j (j < 8). Piece c of row r lands at piece
  // c ^ (r % 8) of the row (the 128-byte swizzle), and r % 8 is the same for all of a thread's
  // rows. Thread 0 also takes the tiles from the counter and issues B's TMA loads, as produce() does.
  static __device__ __forceinline__ void produce_gathered(const RagdotKernelParams& p, const Sched& sched,
                                                          const TensorMap* map_b, u32 ring, const u64* full_bars,
                                                          const u64* empty_bars) {
    constexpr int kRowsPerThread = kBM / 16;
    const u32 full_bar = smem_address(full_bars), empty_bar = smem_address(empty_bars);
    const int tid = threadIdx.x, piece = tid & 7, row0 = tid >> 3;
    const u32 dst_offset = row0 * 128 + ((piece ^ (row0 & 7)) << 4);
    const u16* table = (const u16*)p.lhs;
    const int k = (int)p.k;
    const int half_n = V::kSwiglu ? (int)(p.n / 2) : 0;
    u32 it = 0;
    for (u32 n = 0;; ++n) {
      if (tid == 0) next_tile(p, sched, n);
      const int t = take_tile(n);  // (no pairs here: kGatherA runs one CTA per tile)
      if (t < 0) break;
      int n0, group, kt_begin, kt_end;
      int index[kRowsPerThread];  // table row of each of this thread's tile rows, -1: zeros
      {
        const Unit w = unit_of(t);
        const Tile tile = sched.tile(p, w.tile);
        if (tile.zero) continue;
        n0 = (int)tile.n0;
        group = tile.group;
        unit_k_steps(w, (int)ceil_div(tile.k_len, kBK), kt_begin, kt_end);
#pragma unroll
        for (int j = 0; j < kRowsPerThread; ++j) {
          const i64 r = tile.m0 + row0 + 16 * j;
          const int i = r < tile.row_end ? p.lhs_rows[r] : -1;
          index[j] = i >= 0 && (i64)i < p.lhs_table_rows ? i : -1;
        }
      }
      for (int kt = kt_begin; kt < kt_end; ++kt, ++it) {
        const u32 s = it % kStages, phase = (it / kStages) & 1;
        const u32 full = full_bar + 8 * s;
        mbar_wait(empty_bar + 8 * s, phase ^ 1);
        const u32 a_dst = ring + s * kStageBytes + dst_offset, b_dst = ring + s * kStageBytes + kATileBytes;
        const int k0 = kt * kBK;
        if (tid == 0) {
          mbar_expect_tx(full, kBTileBytes);
          load_b(b_dst, map_b, full, n0, k0, group, 0, half_n);
        }
        const int kk = k0 + piece * 8;  // k is a multiple of 8 (the planner's rule): a piece is all in or all out
#pragma unroll
        for (int j = 0; j < kRowsPerThread; ++j) {
          const bool in = index[j] >= 0 && kk < k;
          const u16* src = in ? table + (i64)index[j] * p.lhs_m + kk : table;
          cp_async_16(a_dst + j * (16 * 128), src, in ? 16u : 0u);
        }
        cp_async_arrive(full);
      }
    }
  }

  // Gathered A in mode 2 (the weight gradient of a projection that read its rows through an
  // index): the gathered rows are k here, a tile's k step 64 of them, each row's 128 columns of m
  // in the two 64-column boxes (128 bytes a row each, 128B-swizzled as TMA would place them). The
  // rows change with every k step, so each thread loads the index of its four rows (k0 + i / 8 +
  // 16 j) before it waits for the stage, and copies piece c = i % 8 of each of them in both boxes.
  // Rows past the group (which the consumers zero anyway) and outside the table are zero-filled.
  // Thread 0 also takes the tiles and issues B's TMA loads, as produce() does.
  static __device__ __forceinline__ void produce_gathered_k(const RagdotKernelParams& p, const Sched& sched,
                                                            const TensorMap* map_b, u32 ring, const u64* full_bars,
                                                            const u64* empty_bars) {
    constexpr int kRowsPerThread = kBK / 16;
    const u32 full_bar = smem_address(full_bars), empty_bar = smem_address(empty_bars);
    const int tid = threadIdx.x, piece = tid & 7, row0 = tid >> 3;
    const u32 dst_offset = row0 * 128 + ((piece ^ (row0 & 7)) << 4);
    const u16* table = (const u16*)p.lhs;
    u32 it = 0;
    for (u32 n = 0;; ++n) {
      if (tid == 0) next_tile(p, sched, n);
      const int t = take_tile(n);
      if (t < 0) break;
      int m0, n0, kt_begin, kt_end;
      i64 k_begin, k_end;
      {
        const Unit w = unit_of(t);
        const Tile tile = sched.tile(p, w.tile);
        if (tile.zero) continue;
        m0 = (int)tile.m0;
        n0 = (int)tile.n0;
        k_begin = tile.k_begin;
        k_end = tile.k_begin + tile.k_len;
        unit_k_steps(w, (int)ceil_div(tile.k_len, kBK), kt_begin, kt_end);
      }
      for (int kt = kt_begin; kt < kt_end; ++kt, ++it) {
        const u32 s = it % kStages, phase = (it / kStages) & 1;
        const u32 full = full_bar + 8 * s;
        const i64 k0 = k_begin + (i64)kt * kBK;
        int index[kRowsPerThread];  // table row of each of this thread's rows of the step, -1: zeros
#pragma unroll
        for (int j = 0; j < kRowsPerThread; ++j) {
          const i64 r = k0 + row0 + 16 * j;
          const int i = r < k_end ? p.lhs_rows[r] : -1;
          index[j] = i >= 0 && (i64)i < p.lhs_table_rows ? i : -1;
        }
        mbar_wait(empty_bar + 8 * s, phase ^ 1);
        const u32 a_dst = ring + s * kStageBytes + dst_offset, b_dst = ring + s * kStageBytes + kATileBytes;
        if (tid == 0) {
          mbar_expect_tx(full, kBTileBytes);
          load_b(b_dst, map_b, full, n0, (int)k0, 0, 0, 0);
        }
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int col = m0 + 64 * half + piece * 8;  // m is a multiple of 8: a piece is all in or all out
#pragma unroll
          for (int j = 0; j < kRowsPerThread; ++j) {
            const bool in = index[j] >= 0 && col < (int)p.m;
            const u16* src = in ? table + (i64)index[j] * p.lhs_k + col : table;
            cp_async_16(a_dst + half * (kATileBytes / 2) + j * (16 * 128), src, in ? 16u : 0u);
          }
        }
        cp_async_arrive(full);
      }
    }
  }

  // Gathered A in n pairs (kGatherPair): both CTAs of a pair multiply the same 128 rows, each by
  // its own kBN columns. One CTA alone would gather all 128 rows of every stage with cp.async, and
  // an SM's cp.async copies, which go through L1, move fewer bytes per cycle than the tensor cores
  // consume here (the one-CTA form runs at about 0.8x the gather-first kernel, bench/RESULTS.md).
  // So rank r gathers only rows [64 r, 64 r + 64), which land where TMA would put them, and sends
  // those 8 KiB to the same place in the other CTA with one shared-to-shared bulk copy completing
  // on that CTA's full barrier. The roles, one warp each except the gathering:
  //   warp 0   (rank 0 also takes the tiles from the counter for both) B's TMA loads and the
  //            stage's expect_tx: B's bytes and the other rank's half of the rows;
  //   warps 1-2  the gathering: thread i takes piece c = i % 8 of rows 64 r + i / 8 + 8 j (j < 8),
  //            one warp instruction reading four whole 128-byte lines, and arrives on the stage's
  //            full barrier and on gathered_bar once its copies land;
  //   warp 3   waits on gathered_bar and sends the stage's half across. It waits for nothing
  //            else, so a stage's rows reach the other CTA as soon as they are here.
  // A stage is refilled only once the consumers of both CTAs have released it (empty barriers
  // count both), by which time the other CTA's copy of this half has landed there and its reads of
  // this CTA's half are done. Both ranks gather and send their halves of every tile, also rows past
  // the group (zeros) and also where a rank has no columns.
  static __device__ __forceinline__ void produce_gathered_pair(const RagdotKernelParams& p, const Sched& sched,
                                                               const TensorMap* map_b, u32 ring, const u64* full_bars,
                                                               const u64* empty_bars, const u64* gathered_bars) {
    constexpr int kRowsPerThread = kBM / 2 / 8;
    constexpr u32 kHalfBytes = kATileBytes / 2;
    const u32 full_bar = smem_address(full_bars), empty_bar = smem_address(empty_bars);
    const u32 gathered_bar = smem_address(gathered_bars);
    const u32 rank = cluster_rank(), other = rank ^ 1;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = threadIdx.x - 32, piece = g & 7, row0 = 64 * (int)rank + (g >> 3);  // (gathering warps)
    const u32 dst_offset = (u32)row0 * 128 + ((u32)(piece ^ (row0 & 7)) << 4);
    const u16* table = (const u16*)p.lhs;
    const int k = (int)p.k;
    const int half_n = V::kSwiglu ? (int)(p.n / 2) : 0;
    u32 it = 0;
    for (u32 n = 0;; ++n) {
      if (threadIdx.x == 0) {
        if (rank == 0) next_tile(p, sched, n);
        else relay_tile_slot(n);
      }
      const int t = take_tile(n);
      if (t < 0) break;
      int n0, group, kt_begin, kt_end;
      bool has_cols;
      int index[kRowsPerThread];  // gathering threads: table row of each of their tile rows, -1: zeros
      {
        const Unit w = unit_of(t);
        const Tile tile = sched.tile(p, w.tile);
        if (tile.zero) continue;
        n0 = (int)(tile.n0 + rank * kBN);
        has_cols = n0 < p.n;
        group = tile.group;
        unit_k_steps(w, (int)ceil_div(tile.k_len, kBK), kt_begin, kt_end);
#pragma unroll
        for (int j = 0; j < kRowsPerThread; ++j) {
          const i64 r = tile.m0 + row0 + 8 * j;
          const int i = warp >= 1 && warp <= 2 && r < tile.row_end ? p.lhs_rows[r] : -1;
          index[j] = i >= 0 && (i64)i < p.lhs_table_rows ? i : -1;
        }
      }
      for (int kt = kt_begin; kt < kt_end; ++kt, ++it) {
        const u32 s = it % kStages, phase = (it / kStages) & 1;
        const u32 full = full_bar + 8 * s, stage = ring + s * kStageBytes;
        if (warp == 3) {
          if (lane == 0) {
            mbar_wait(gathered_bar + 8 * s, phase);
            // the gathered rows were written through the generic proxy; the bulk copy reads them
            // through the async one
            fence_async_shared();
            const u32 half = stage + rank * kHalfBytes;
            bulk_copy_to_cluster(cluster_address(half, other), half, kHalfBytes, cluster_address(full, other));
          }
          continue;
        }
        if (warp == 0) {
          if (lane == 0) {
            mbar_wait(empty_bar + 8 * s, phase ^ 1);
            mbar_expect_tx(full, (has_cols ? kBTileBytes : 0) + kHalfBytes);
            if (has_cols) load_b(stage + kATileBytes, map_b, full, n0, kt * kBK, group, rank, half_n);
          }
          continue;
        }
        mbar_wait(empty_bar + 8 * s, phase ^ 1);
        const int kk = kt * kBK + piece * 8;  // k is a multiple of 8 (the planner's rule): a piece is all in or all out
#pragma unroll
        for (int j = 0; j < kRowsPerThread; ++j) {
          const bool in = index[j] >= 0 && kk < k;
          const u16* src = in ? table + (i64)index[j] * p.lhs_m + kk : table;
          cp_async_16(stage + dst_offset + j * (8 * 128), src, in ? 16u : 0u);
        }
        cp_async_arrive(full);
        cp_async_arrive(gathered_bar + 8 * s);
      }
    }
  }

  // f32 outputs: each lane stores its accumulator pairs as they lie (8 bytes), so a quad of lanes
  // writes 32 contiguous bytes of a row, one whole L2 sector.
  // (kCols: the width of the accumulator tile given, kBN or, for the SwiGLU activations, kBN / 2.)
  template <int kCols>
  static __device__ __forceinline__ void store_tile(float* otile, i64 out_m, int r0, int lane, i64 rows_here,
                                                    i64 cols_lim, const float (&acc)[kCols / 2], F32) {
    const int c2 = (lane & 3) * 2;
#pragma unroll
    for (int j = 0; j < kCols / 8; ++j) {
      const int c = j * 8 + c2;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = r0 + h * 8;
        if (c < cols_lim && r < rows_here) store_pair(otile + r * out_m + c, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1], F32());
      }
    }
  }

  // Lane 4q+i's 8 bytes, from its pairs w0 and w1 of two 8-column blocks: with (i even) its own
  // w0 and its neighbour's, or (i odd) its neighbour's w1 and its own (every lane shuffles), at
  // column neighbour_column(lane) of the blocks; stored only where `store`.
  static __device__ __forceinline__ int neighbour_column(int lane) { return (lane & 1) * 8 + (lane & 2) * 2; }
  static __device__ __forceinline__ void store_neighbours(u16* dst, u32 w0, u32 w1, int lane, bool store) {
    const bool odd = lane & 1;
    const u32 got = __shfl_xor_sync(0xffffffffu, odd ? w0 : w1, 1);
    if (store) {
      const u32 lo = odd ? got : w0, hi = odd ? w1 : got;
      asm volatile("st.global.v2.b32 [%0], {%1, %2};\n" ::"l"(dst), "r"(lo), "r"(hi) : "memory");
    }
  }

  // 16-bit outputs: a lane's pair is only 4 bytes, so neighbouring lanes first swap halves of two
  // 8-column blocks (one shuffle): each lane then holds 4 adjacent columns and stores 8 bytes, and
  // a quad again writes 32 contiguous bytes of a row per store, with half the store instructions.
  // Lane 4q+i holds, of blocks j and j+1, columns 2i..2i+1; after the swap it holds block j + (i&1),
  // columns 4(i>>1)..4(i>>1)+3. Columns come in multiples of 8 (the planner's rule), so a lane's
  // 4 columns are either all inside the output or all past its edge.
  template <int kCols, class T>
  static __device__ __forceinline__ void store_tile(u16* otile, i64 out_m, int r0, int lane, i64 rows_here,
                                                    i64 cols_lim, const float (&acc)[kCols / 2], T) {
    if constexpr (kWideStores) {
      store_tile_wide<kCols>(otile, out_m, r0, lane, rows_here, cols_lim, acc, T());
    } else {
      u32 words[kCols / 4];
      pack_words<kCols>(words, acc, T());
      store_words<kCols>(otile, out_m, r0, lane, rows_here, cols_lim, words);
    }
  }

  // A 16-bit tile's words: word 2 j + h holds the lane's columns 8 j + 2 (lane % 4) + {0, 1} of
  // its row r0 + 8 h (accumulator pair 4 j + 2 h), rounded to the output type.
  template <int kCols, class T>
  static __device__ __forceinline__ void pack_words(u32 (&words)[kCols / 4], const float (&acc)[kCols / 2], T) {
#pragma unroll
    for (int j = 0; j < kCols / 8; ++j) {
#pragma unroll
      for (int h = 0; h < 2; ++h) words[2 * j + h] = pack2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1], T());
    }
  }
  // store_tile's 16-bit stores of packed words (pack_words), blocks j and j + 1 per neighbour swap.
  template <int kCols>
  static __device__ __forceinline__ void store_words(u16* otile, i64 out_m, int r0, int lane, i64 rows_here,
                                                     i64 cols_lim, const u32 (&words)[kCols / 4]) {
#pragma unroll
    for (int j = 0; j < kCols / 8; j += 2) {
      const int c = j * 8 + neighbour_column(lane);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = r0 + h * 8;
        store_neighbours(otile + r * out_m + c, words[2 * j + h], words[2 * j + 2 + h], lane,
                         c < cols_lim && r < rows_here);
      }
    }
  }

  // The weight gradient writes an output far larger than its inputs (g x m x n), so its stores
  // are the wider kind: a quad transposes its words of four 8-column blocks (lane 4q+i holds
  // columns 2i..2i+1 of each; afterwards it holds all 8 columns of block i) with two rounds of
  // swaps, first with lane i^2, then with lane i^1, and each lane stores 16 bytes. A quad then
  // writes 64 contiguous bytes of a row per store: half the store instructions and L2 requests of
  // the 8-byte form, for twice the shuffles. Whole 8-column blocks lie inside or past the output
  // (columns come in multiples of 8), and out, out_m, out_g and n keep 16-byte alignment. The
  // stores are evict-first (.cs): the kernel never reads its output back, and at deepseek-v3's
  // 15 GB it would only push the operands out of L2.
  static constexpr bool kWideStores = V::kMode == 2;
  template <int kCols, class T>
  static __device__ __forceinline__ void store_tile_wide(u16* otile, i64 out_m, int r0, int lane, i64 rows_here,
                                                         i64 cols_lim, const float (&acc)[kCols / 2], T) {
    static_assert(kCols % 32 == 0, "the quad transposes four 8-column blocks at a time");
    const int i = lane & 3;
    const bool upper = i & 2, odd = i & 1;
#pragma unroll
    for (int j = 0; j < kCols / 8; j += 4) {
      const int c = (j + i) * 8;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        u32 w[4];  // w[b]: this lane's columns 2i..2i+1 of block j + b
#pragma unroll
        for (int b = 0; b < 4; ++b) w[b] = pack2(acc[4 * (j + b) + 2 * h], acc[4 * (j + b) + 2 * h + 1], T());
        // Round one, with lane i^2: keep the two blocks of this lane's half (b & 2 == i & 2), give
        // the other two. Then x[p][e] is lane (p, i & 1)'s word of block (i & 2) + e.
        const u32 mine0 = upper ? w[2] : w[0], mine1 = upper ? w[3] : w[1];
        const u32 got0 = __shfl_xor_sync(0xffffffffu, upper ? w[0] : w[2], 2);
        const u32 got1 = __shfl_xor_sync(0xffffffffu, upper ? w[1] : w[3], 2);
        const u32 x00 = upper ? got0 : mine0, x01 = upper ? got1 : mine1;
        const u32 x10 = upper ? mine0 : got0, x11 = upper ? mine1 : got1;
        // Round two, with lane i^1: keep block e = i & 1, give the other. Then word p of this lane
        // is lane p's word of block j + i, columns 2p..2p+1.
        const u32 got2 = __shfl_xor_sync(0xffffffffu, odd ? x00 : x01, 1);
        const u32 got3 = __shfl_xor_sync(0xffffffffu, odd ? x10 : x11, 1);
        const u32 y0 = odd ? got2 : x00, y1 = odd ? x01 : got2, y2 = odd ? got3 : x10, y3 = odd ? x11 : got3;
        const int r = r0 + h * 8;
        if (c < cols_lim && r < rows_here)
          asm volatile("st.global.cs.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(otile + r * out_m + c), "r"(y0), "r"(y1),
                       "r"(y2), "r"(y3)
                       : "memory");
      }
    }
  }

  // Swapped operands: this warpgroup's 128 columns of the tile, for its token rows [0, rows).
  // Accumulator pair (s kBM / 2 + 4j + 2h, + 1) is column 64 s + 16 warp + lane / 4 + 8h and rows
  // 8j + 2 (lane % 4) + {0, 1}: each 8 x 8 block of it, rounded to 16 bits, goes through
  // movmatrix.trans, after which lane holds row 8j + lane / 4 and two adjacent columns, of both
  // blocks h; then the neighbour swap of store_tile gives each lane four adjacent columns, and a
  // quad writes 32 contiguous bytes of a row. Columns come in multiples of 8 (the planner's rule):
  // a lane's four are all inside the output or all past its edge.
  static __device__ __forceinline__ void store_tile_swapped(O* otile, i64 out_m, int warp, int lane, i64 rows,
                                                            i64 cols_lim, const float (&acc)[kAcc]) {
    typedef typename V::Out Out;
#pragma unroll
    for (int slice = 0; slice < 2; ++slice) {
      const int c = slice * 64 + warp * 16 + neighbour_column(lane);
#pragma unroll
      for (int j = 0; j < kBM / 8; ++j) {
        if (8 * j >= rows) break;  // the same for the whole warp
        const int a = slice * (kBM / 2) + 4 * j;
        const u32 t0 = movmatrix_trans(pack2(acc[a], acc[a + 1], Out()));
        const u32 t1 = movmatrix_trans(pack2(acc[a + 2], acc[a + 3], Out()));
        const int r = 8 * j + (lane >> 2);
        store_neighbours(otile + r * out_m + c, t0, t1, lane, r < rows && c < cols_lim);
      }
    }
  }

  // kScatterOut: this warpgroup's rows [0, rows_here) of the tile at (m0, n0), each rounded to the
  // output type and times its row's scale, added into table row out_rows[m0 + r]. As in
  // store_tile, neighbouring lanes swap one pair of two 8-column blocks, so that each lane holds
  // four adjacent columns and adds them with one 16-byte reduction (the table's rows are a multiple
  // of 8 floats long and 16-byte aligned, the planner's rule). Every lane shuffles; only lanes of a
  // kept row add.
  static __device__ __forceinline__ void scatter_rows(const RagdotKernelParams& p, i64 m0, i64 n0, int r0, int lane,
                                                      i64 rows_here, i64 cols_lim, const float (&acc)[kAcc]) {
    typedef typename V::Out Out;
    const bool odd = lane & 1;
    const int c4 = (lane & 1) * 8 + (lane & 2) * 2;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = r0 + h * 8;
      i64 to = -1;
      float scale = 0.0f;
      if (r < rows_here) {
        to = p.out_rows[m0 + r];
        scale = p.row_scales[m0 + r];
        if (to >= p.out_table_rows) to = -1;
      }
      float* row = (float*)p.out + (to < 0 ? 0 : to) * p.out_m + n0;
#pragma unroll
      for (int j = 0; j < kBN / 8; j += 2) {
        float a[2], b[2];  // this lane's columns of blocks j and j + 1, rounded and scaled
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          a[e] = to_float(from_float(acc[4 * j + 2 * h + e], Out()), Out()) * scale;
          b[e] = to_float(from_float(acc[4 * j + 4 + 2 * h + e], Out()), Out()) * scale;
        }
        const float g0 = __shfl_xor_sync(0xffffffffu, odd ? a[0] : b[0], 1);
        const float g1 = __shfl_xor_sync(0xffffffffu, odd ? a[1] : b[1], 1);
        const int c = j * 8 + c4;
        if (to >= 0 && c < cols_lim) {
          const float v0 = odd ? g0 : a[0], v1 = odd ? g1 : a[1], v2 = odd ? b[0] : g0, v3 = odd ? b[1] : g1;
          asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(row + c), "f"(v0), "f"(v1), "f"(v2),
                       "f"(v3)
                       : "memory");
        }
      }
    }
  }

  // Mode 2: k rows [valid, 64) of a stage belong to the next group (or lie past the tensor):
  // the 256 consumer threads write zeros over them in A and B. In both operands a k row is one
  // 128-byte line of each 64-wide chunk, and the swizzle only permutes 16-byte pieces within a
  // line, so whole lines can be cleared without knowing the pattern.
  static __device__ __forceinline__ void zero_k_tail(u32 stage, int valid) {
    clear_k_lines(stage, 2 + kBN / 64, valid);  // A: two 64-m chunks; B: kBN / 64 chunks of 64 n
    fence_async_shared();
    consumers_sync();
  }
  // The clearing alone, of `chunks` 64-wide chunks at `addr` (the weight-gradient strips clear A's
  // tile and B's slot apart, and fence and meet once).
  static __device__ __forceinline__ void clear_k_lines(u32 addr, int chunks, int valid, int thread = (int)threadIdx.x - 128,
                                                       int threads = 256) {
    const int lines = kBK - valid, pieces = lines * chunks * 8;
    for (int i = thread; i < pieces; i += threads) {
      const int piece = i & 7, line = (i >> 3) % lines, chunk = (i >> 3) / lines;
      const u32 at = addr + chunk * (kBK * 128) + (valid + line) * 128 + piece * 16;
      asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(at), "r"(0) : "memory");
    }
  }

  // A consumer warpgroup is done with stage s: its producer may refill it, and so may its sharers'
  // producers, which write half of B or a box of A into this CTA's stage. Every CTA of the cluster
  // hears of it (see the empty barriers' count), so that none runs more than a ring ahead of any.
  static __device__ __forceinline__ void release_stage(u64* empty_bar, u32 s, u32 rank) {
    mbar_arrive(smem_address(&empty_bar[s]));
#pragma unroll
    for (u32 peer = 1; peer < kCluster; ++peer)
      mbar_arrive_remote(cluster_address(smem_address(&empty_bar[s]), rank ^ peer));
  }

  // kTmaStore: this warpgroup's 64 x kBN outputs go out one box of 64 rows x kStoreBoxCols at a
  // time through two buffers of its staging area, taken in turn (`stores` counts this
  // warpgroup's boxes across tiles): the box is written swizzled, as the tensor map's TMA store
  // reads it (128-byte rows: 16-byte piece c of row r at c ^ (r % 8); 64-byte rows: at
  // c ^ (r / 2 % 4); either way the eight rows of an 8 x 8 block land in different banks), by
  // stmatrix, each instruction a warp's two 8-column blocks of both its 8-row halves, then
  // thread 0 sends it out in a bulk group of its own, and a buffer is rewritten once its previous
  // box (kStoreBuffers groups back) has been read out, so writing one box overlaps sending the
  // others; more buffers keep more boxes in flight, so that a warpgroup waits less for the memory
  // system to take its stores before it goes on to multiply. Boxes wholly past n are skipped; rows
  // past m and columns past n are clipped by the map.
  // Mode 2's map is 3-D (n, m, group), mode 1's 2-D (n, m).
  static __device__ __forceinline__ void store_tile_tma(const TensorMap* map_out, u32 area, int wg, int tid, int n0,
                                                        int m0, int group, i64 cols_lim, u32& stores,
                                                        const float (&acc)[kAcc]) {
    constexpr int kRowBytes = kStoreBoxCols * 2, kPieces = kRowBytes / 16;
    const int warp = tid >> 5, lane = tid & 31;
#pragma unroll
    for (int box = 0; box < kBN / kStoreBoxCols; ++box) {
      if (box * kStoreBoxCols >= cols_lim) break;  // the same for the whole warpgroup
      const u32 buffer = area + (stores % V::kStoreBuffers) * (64 * kRowBytes);
      if (tid == 0) bulk_wait_read<V::kStoreBuffers - 1>();  // this buffer's previous box has been read out
      warpgroup_sync(wg);
#pragma unroll
      for (int piece = 0; piece < kPieces; piece += 2) {  // 16 bytes (8 columns) of each row, two at a time
        const int j = box * kPieces + piece;             // the accumulators' block of 8 columns
        // matrices 0..3: blocks (j, rows 0-7), (j, rows 8-15), (j + 1, 0-7), (j + 1, 8-15) of
        // this warp's 16 rows; this lane gives row lane % 8 of matrix lane / 8
        const int r = warp * 16 + ((lane >> 3) & 1) * 8 + (lane & 7);
        const int swizzle = kRowBytes == 128 ? (r & 7) : ((r >> 1) & 3);
        const u32 addr = buffer + r * kRowBytes + (((piece + (lane >> 4)) ^ swizzle) << 4);
        typedef typename V::Out Out;
        stmatrix_x4(addr, pack2(acc[4 * j], acc[4 * j + 1], Out()), pack2(acc[4 * j + 2], acc[4 * j + 3], Out()),
                    pack2(acc[4 * j + 4], acc[4 * j + 5], Out()), pack2(acc[4 * j + 6], acc[4 * j + 7], Out()));
      }
      fence_async_shared();  // these generic-proxy writes before the TMA unit's reads
      warpgroup_sync(wg);
      if (tid == 0) {
        if constexpr (V::kMode == 1) tma_store_2d(map_out, buffer, n0 + box * kStoreBoxCols, m0 + wg * 64);
        else tma_store_3d(map_out, buffer, n0 + box * kStoreBoxCols, m0 + wg * 64, group);
        bulk_commit();
      }
      ++stores;
    }
  }

  // The stage protocol of k steps [kt_begin, kt_end), `it` counting the steps this warpgroup has
  // taken: for each, `wait(it, kt)` until its operands are in shared memory, let `prepare(it, kt)`
  // ready them, `issue(it, kt)` its wgmma instructions, and keep one k step in flight: the one
  // before is done, so `release(it, kt)` of that step hands its operands back. At least one step.
  // (The weight-gradient strips' two rings use it; k_loop below is the same protocol over one
  // ring, written out: built on this, its register allocation changed and the cluster variants
  // spilled.)
  template <class Wait, class Prepare, class Issue, class Release>
  static __device__ __forceinline__ void k_protocol(int kt_begin, int kt_end, u32& it, float (&acc)[kAcc], Wait wait,
                                                    Prepare prepare, Issue issue, Release release) {
    u32 prev_it = 0;
    int prev_kt = 0;
    for (int kt = kt_begin; kt < kt_end; ++kt, ++it) {
      wait(it, kt);
      prepare(it, kt);
#pragma unroll
      for (int i = 0; i < kAcc; ++i) fence_operand(acc[i]);
      wgmma_fence();
      issue(it, kt);
      wgmma_commit();
#pragma unroll
      for (int i = 0; i < kAcc; ++i) fence_operand(acc[i]);
      wgmma_wait<1>();
      if (kt > kt_begin) release(prev_it, prev_kt);
      prev_it = it, prev_kt = kt;
    }
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < kAcc; ++i) fence_operand(acc[i]);
    release(prev_it, prev_kt);
  }

  // A tile's k steps [kt_begin, kt_end): for each, wait for its stage, let `prepare(s, kt)` ready
  // the stage, `issue(s)` issue its wgmma instructions, and keep one k step in flight: the one
  // before is done, so its stage can be refilled.
  // `overlap()` runs once the tile's second k step is issued, while the tensor cores have two in
  // hand (a tile of one k step: not at all).
  template <class Prepare, class Issue, class Overlap>
  static __device__ __forceinline__ void k_loop(u64* full_bar, u64* empty_bar, int tid, u32 rank, int kt_begin,
                                                int kt_end, u32& it, float (&acc)[kAcc], Prepare prepare, Issue issue,
                                                Overlap overlap) {
    u32 prev_stage = 0;
    for (int kt = kt_begin; kt < kt_end; ++kt, ++it) {
      const u32 s = it % kStages, phase = (it / kStages) & 1;
      mbar_wait(smem_address(&full_bar[s]), phase);
      prepare(s, kt);
#pragma unroll
      for (int i = 0; i < kAcc; ++i) fence_operand(acc[i]);
      wgmma_fence();
      issue(s);
      wgmma_commit();
#pragma unroll
      for (int i = 0; i < kAcc; ++i) fence_operand(acc[i]);
      if (kt == kt_begin + 1) overlap();
      wgmma_wait<1>();
      if (kt > kt_begin && tid == 0) release_stage(empty_bar, prev_stage, rank);
      prev_stage = s;
    }
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < kAcc; ++i) fence_operand(acc[i]);
    if (tid == 0) release_stage(empty_bar, prev_stage, rank);
  }

  // Swapped operands: the k loop of a tile of kN rows (wgmma's N, a compile-time constant of the
  // loop: a choice of instruction inside it makes ptxas serialize the wgmma pipeline, so each N
  // has a loop of its own). wgmma's A: this warpgroup's two 64-column slices of the weights
  // (boxes 2 wg and 2 wg + 1 of 64 columns, or 64-row runs of a K-major box); its B: the tile's
  // rows.
  template <int kN>
  static __device__ __forceinline__ void multiply_rows(u32 ring, u64* full_bar, u64* empty_bar, int wg, int tid,
                                                       u32 rank, int kt_begin, int kt_end, u32& it, float (&acc)[kAcc]) {
    static_assert(Mma::kMaxRows == kBM && Mma::kRowStep == kSwapStep, "the instructions' N are the tile's rows");
    k_loop(full_bar, empty_bar, tid, rank, kt_begin, kt_end, it, acc, [](u32, int) {}, [&](u32 s) {
      const u32 x_tile = ring + s * kStageBytes, w_tile = x_tile + kATileBytes + wg * 2 * (64 * 128);
#pragma unroll
      for (int ks = 0; ks < kBK / 16; ++ks) {
        const u64 dx = smem_desc(x_tile + ks * 32, 16, 1024);
        const u64 dw0 = V::kBKMajor ? smem_desc(w_tile + ks * 32, 16, 1024) : smem_desc(w_tile + ks * 2048, kBK * 128, 1024);
        const u64 dw1 = V::kBKMajor ? smem_desc(w_tile + 64 * 128 + ks * 32, 16, 1024)
                                    : smem_desc(w_tile + 64 * 128 + ks * 2048, kBK * 128, 1024);
        Mma::template run<kN>(acc, dw0, dw1, dx);
      }
    }, [] {});
  }
  // The loop of the tile's N (n_rows: a multiple of kSwapStep up to kBM).
  template <int kN = kSwapStep>
  static __device__ __forceinline__ void multiply_swapped(int n_rows, u32 ring, u64* full_bar, u64* empty_bar, int wg,
                                                          int tid, u32 rank, int kt_begin, int kt_end, u32& it,
                                                          float (&acc)[kAcc]) {
    if constexpr (kN < kBM) {
      if (n_rows > kN) {
        multiply_swapped<kN + kSwapStep>(n_rows, ring, full_bar, empty_bar, wg, tid, rank, kt_begin, kt_end, it, acc);
        return;
      }
    }
    multiply_rows<kN>(ring, full_bar, empty_bar, wg, tid, rank, kt_begin, kt_end, it, acc);
  }

  // kSplitTail: this warpgroup's partial sums of a piece of a split tile go into the piece's slot
  // (thread-major: each of its 128 threads' i-th sums adjacent, so that the warpgroup writes and
  // reads whole lines), then it counts itself in on the tile's counter. The piece that arrives
  // last adds every piece's sums in piece order into acc and returns true: it stores the tile.
  // The others return false.
  static __device__ __forceinline__ bool join_pieces(const RagdotKernelParams& p, const Unit& w, int wg, int tid,
                                                     float (&acc)[kAcc]) {
    constexpr i64 kSlotFloats = ragdot_split_slot_floats(kBN) / 2;  // one warpgroup's 64 x kBN sums
    const int pieces = tile_split.pieces;
    float* mine = p.split_partials + ((i64)w.slot * 2 + wg) * kSlotFloats + tid;
#pragma unroll
    for (int i = 0; i < kAcc; ++i) st_global_cg(mine + i * 128, acc[i]);
    __threadfence();  // every thread's sums are visible GPU-wide before the count says they are there
    warpgroup_sync(wg);
    if (tid == 0) split_arrivals[wg] = atomicAdd(p.tile_counter + 1 + 2 * (w.slot / pieces) + wg, 1);
    warpgroup_sync(wg);
    if (*(volatile int*)&split_arrivals[wg] != pieces - 1) return false;
    __threadfence();  // the other pieces' sums, counted in before this one, are visible to it
    // every slot read back, this piece's too: a running sum in registers beside its own sums
    // would not fit, and the order must not depend on which piece came last
    const float* slot = p.split_partials + ((i64)(w.slot - w.piece) * 2 + wg) * kSlotFloats + tid;
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[i] = ld_global_cg(slot + i * 128);
    for (int q = 1; q < pieces; ++q) {
      slot += 2 * kSlotFloats;
#pragma unroll
      for (int i = 0; i < kAcc; ++i) acc[i] += ld_global_cg(slot + i * 128);
    }
    return true;
  }

  static __device__ __forceinline__ void consume(const RagdotKernelParams& p, const Sched& sched, u32 ring,
                                                 u64* full_bar, u64* empty_bar, int wg, const TensorMap* map_out) {
    const int tid = threadIdx.x & 127, warp = tid >> 5, lane = tid & 31;
    O* out = (O*)p.out;
    const u32 rank = kCluster > 1 ? cluster_rank() : 0;
    u32 it = 0, stores = 0;
    float acc[kAcc];
    // kOverlapStore: the last tile's words, still to be stored at held_out (rows and columns left
    // there: held_rows, held_cols; none when either is 0 or less)
    u32 held[kOverlap ? kAcc / 2 : 1];
    O* held_out = out;
    int held_rows = 0, held_cols = 0;
    const int r0 = warp * 16 + (lane >> 2);
    auto store_held = [&] {
      if constexpr (kOverlap) {
        if (held_rows > 0 && held_cols > 0) store_words<kBN>(held_out, p.out_m, r0, lane, held_rows, held_cols, held);
        held_rows = 0;
      }
    };
    for (u32 n = 0;; ++n) {
      const int t = take_tile(n);
      if (t < 0) break;
      // Only what the k loop needs stays live across it (the accumulators take most registers);
      // the epilogue looks the tile up again.
      const Unit w = unit_of(t);
      int kt_begin, kt_end, k_len;
      int n_rows = 0;  // swapped operands: the tile's wgmma N, its rows rounded up to kSwapStep
      bool idle;
      {
        const Tile tile = cta_tile(p, sched, w.tile, rank);
        const i64 cta_rows = imin((i64)kBM, tile.row_end - tile.m0);  // this CTA's
        const i64 rows_here = cta_rows - wg * 64;                     // this warpgroup's
        const bool cta_cols = !kPairN || tile.n0 < p.n;               // an n pair's rank past n has none
        k_len = (int)tile.k_len;
        unit_k_steps(w, tile.zero ? 0 : (int)ceil_div(tile.k_len, kBK), kt_begin, kt_end);
        // Mode 1: a group's last tile often has 64 rows or fewer; the warpgroup whose rows all lie
        // past the group's end keeps the pipeline's barriers but issues no wgmma, which halves that
        // tile's tensor-core time (groups of ~128 rows, as in deepseek-v3, have many such tiles).
        // Mode 2: both warpgroups take every k tile, since they zero its tail together, unless the
        // CTA has no rows at all (an m pair's rank past m). Pairs: nothing to do without columns.
        // Swapped operands: every row is both warpgroups' (each has its 128 of the tile's
        // columns), unless its columns lie past n or an m pair's CTA has no rows.
        const bool nothing_here = kSwap ? tile.n0 + wg * (kBN / 2) >= p.n || (kPairM && cta_rows <= 0)
                                        : (V::kMode == 1 ? rows_here <= 0 : kPairM && cta_rows <= 0) || !cta_cols;
        idle = nothing_here || kt_begin == kt_end;
        if constexpr (kSwap) n_rows = (int)ceil_div(cta_rows, (i64)kSwapStep) * kSwapStep;
      }
      // Zeroed on every path, outside any branch: accumulators defined on a divergent path make
      // ptxas serialize the wgmma pipeline (warning C7520).
#pragma unroll
      for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;
      if (idle) {
        // nothing to multiply: only keep the stage barriers' protocol with the producer. The
        // warpgroup meets before thread 0 releases a stage: wgmma holds its four warps together
        // on the other path, nothing does here, and a warp left behind (still adding the last
        // tile's rows into a table, say) would find the stage's full barrier two phases on,
        // which its parity wait cannot tell from not yet full: it would wait forever, and its
        // warpgroup's next wgmma with it.
        store_held();
        for (int kt = kt_begin; kt < kt_end; ++kt, ++it) {
          const u32 s = it % kStages, phase = (it / kStages) & 1;
          mbar_wait(smem_address(&full_bar[s]), phase);
          warpgroup_sync(wg);
          if (tid == 0) release_stage(empty_bar, s, rank);
        }
      } else if constexpr (kSwap) {
        multiply_swapped(n_rows, ring, full_bar, empty_bar, wg, tid, rank, kt_begin, kt_end, it, acc);
      } else {
        k_loop(
            full_bar, empty_bar, tid, rank, kt_begin, kt_end, it, acc,
            [&](u32 s, int kt) {
              // cp.async writes A through the generic proxy; wgmma reads shared memory through the async one
              if (V::kGatherA) fence_async_shared();
              if (V::kMode == 2) {
                const int valid = imin(k_len - kt * kBK, kBK);
                if (valid < kBK) zero_k_tail(ring + s * kStageBytes, valid);
              }
            },
            [&](u32 s) {
              const u32 a_tile = ring + s * kStageBytes + wg * (64 * 128), b_tile = ring + s * kStageBytes + kATileBytes;
#pragma unroll
              for (int ks = 0; ks < kBK / 16; ++ks) {
                const u64 da = V::kMode == 1 ? smem_desc(a_tile + ks * 32, 16, 1024)
                                             : smem_desc(a_tile + ks * 2048, kBK * 128, 1024);
                const u64 db = V::kBKMajor ? smem_desc(b_tile + ks * 32, 16, 1024)
                                           : smem_desc(b_tile + ks * 2048, kBK * 128, 1024);
                Mma::run(acc, da, db, 1);
              }
            },
            store_held);
        store_held();  // (a tile of one k step)
      }
      // epilogue: accumulator pair (4j + 2h, 4j + 2h + 1) is row 16*warp + lane/4 + 8h,
      // columns 8j + 2*(lane%4) + {0, 1}
      const Tile tile = cta_tile(p, sched, w.tile, rank);  // past n: cols_lim <= 0, nothing is stored
      const i64 cols_lim = p.n - tile.n0;
      const i64 rows_here = imin((i64)kBM, tile.row_end - tile.m0) - wg * 64;  // this warpgroup's rows
      if constexpr (V::kSplitTail) {
        // a piece of a split tile: only the last to arrive has the whole sums and stores them (a
        // warpgroup without rows here has nothing to add in any piece)
        if (w.slot >= 0 && rows_here > 0 && !join_pieces(p, w, wg, tid, acc)) continue;
      }
      if constexpr (kSwap) {
        // (zero tiles too: their accumulators are zeros)
        store_tile_swapped(out + tile.m0 * p.out_m + tile.n0 + wg * (kBN / 2), p.out_m, warp, lane, rows_here + wg * 64,
                           cols_lim - wg * (kBN / 2), acc);
        continue;
      }
      if constexpr (V::kTmaStore) {
        // (a warpgroup with no rows or columns here has nothing to send: it skips as a whole;
        // in mode 1 one with fewer than 64 rows, the rest of its box being the next group's,
        // stores them from the registers below)
        const u32 area = ring + kStages * kStageBytes + wg * (kStagingBytes / 2);
        if (V::kMode == 2 || rows_here >= 64) {
          if (rows_here > 0 && cols_lim > 0)
            store_tile_tma(map_out, area, wg, tid, (int)tile.n0, (int)tile.m0, tile.group, cols_lim, stores, acc);
          continue;
        }
      }
      if constexpr (kOverlap) {
        pack_words<kBN>(held, acc, typename V::Out());
        held_out = out + tile_out_offset<V::kMode>(p, tile) + wg * 64 * p.out_m;
        held_rows = (int)imin(rows_here, (i64)kBM);
        held_cols = (int)imin(cols_lim, (i64)kBN);
        continue;
      }
      if constexpr (V::kScatterOut) {
        // zero tiles (rows no group covers) would add nothing
        if (!tile.zero) scatter_rows(p, tile.m0 + wg * 64, tile.n0, r0, lane, rows_here, cols_lim, acc);
        continue;
      }
      if constexpr (V::kSwiglu) {
        // The tile's gate columns are its accumulator blocks j < kBN / 16 (block j: columns
        // 8 j .. 8 j + 7), their up columns blocks j + kBN / 16: accumulators i and i + kAcc / 2.
        typedef typename V::Out Out;
        float act[kAcc / 2];
#pragma unroll
        for (int i = 0; i < kAcc / 2; ++i) {
          const float gate = to_float(from_float(acc[i], Out()), Out()), up = to_float(from_float(acc[kAcc / 2 + i], Out()), Out());
          act[i] = silu(gate) * up;
        }
        O* otile = out + tile.m0 * p.out_m + tile.n0 / 2 + wg * 64 * p.out_m;  // out: [m, n / 2]
        store_tile<kBN / 2>(otile, p.out_m, r0, lane, rows_here, p.n / 2 - tile.n0 / 2, act, Out());
        continue;
      }
      if constexpr (!kSwap) {
        O* otile = out + tile_out_offset<V::kMode>(p, tile) + wg * 64 * p.out_m;  // the family's out_n is 1
        store_tile<kBN>(otile, p.out_m, r0, lane, rows_here, cols_lim, acc, typename V::Out());
      }
    }
    store_held();
    if constexpr (V::kTmaStore) {
      if (tid == 0) bulk_wait<0>();  // the last stores are done before the kernel ends
    }
  }
};

}  // namespace hopper
}  // namespace ragdot
