// The order in which mode 1's groups are handed out, when the plan asks for the mixed order
// (RagdotKernelParams::tile_order). Plain C++: NVRTC compiles it into every kernel, and the host
// tests it.
//
// Why: a group of many rows is bound by the tensor cores (its weight tile serves all its m tiles),
// a group of a few rows by DRAM (it streams a whole weight tile for a handful of rows). Handed out
// in group-index order, a router whose busy experts sit together (a skewed deepseek-v3 batch
// whose hot experts have low indices) runs all its compute-bound tiles first and all its
// memory-bound tiles last, each phase leaving the other resource idle. The mixed order sorts the
// groups by rows, largest first, and hands out the tiles of that list from both ends in turn: one
// from the front (large groups), one from the back (small groups), so that at any moment about
// half the SMs multiply big tiles while the other half stream weights for small ones, wherever
// the busy experts sit. Within a group the tiles keep their order (reversed for the back half,
// which still keeps the m tiles of one weight tile adjacent).
//
// Where the groups are about equal (a balanced router) there is nothing to mix, and the ranked
// list would only put the groups with a last, partial m tile together. So the plan's default,
// RAGDOT_ORDER_AUTO, has each launch check that the largest group has at least
// RAGDOT_ORDER_MIN_SKEW times the mean rows (ragdot_mixed_order_pays) and keep the plain order
// otherwise: a balanced batch runs exactly as before. RAGDOT_ORDER_MIX takes the mixed order
// whatever the sizes, RAGDOT_ORDER_PLAIN never.
//
// The scheduler keeps its table in the same shared memory as the plain order: each entry of the
// sorted list packs the tile prefix (high bits) and the segment (low bits), so the mixed order is
// only taken where both fit (ragdot_mixed_order_fits); else the kernel keeps the plain order.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define RAGDOT_ORDER_FN __host__ __device__ __forceinline__
#else
#define RAGDOT_ORDER_FN inline
#endif

// RagdotKernelParams::tile_order
#define RAGDOT_ORDER_PLAIN 0
#define RAGDOT_ORDER_AUTO 1
#define RAGDOT_ORDER_MIX 2

#define RAGDOT_ORDER_SEGMENT_BITS 12
// The most computed groups the mixed order sorts: each CTA ranks them in its prologue, at a cost
// that grows with their square (about a microsecond for 256 groups).
#define RAGDOT_ORDER_MAX_GROUPS 1024

// Whether the packed table holds `segments` segments (computed groups plus mode 1's two zero
// segments) and at most `max_tiles` tiles (the prefix lives in the remaining 19 bits of an int).
RAGDOT_ORDER_FN bool ragdot_mixed_order_fits(long long segments, long long max_tiles) {
  return segments >= 1 && segments - 2 <= RAGDOT_ORDER_MAX_GROUPS &&
         segments < (1LL << RAGDOT_ORDER_SEGMENT_BITS) &&
         max_tiles < (1LL << (31 - RAGDOT_ORDER_SEGMENT_BITS));
}

#define RAGDOT_ORDER_MIN_SKEW 4

// Whether a launch's groups are uneven enough for the mixed order: the largest of `groups` groups
// has at least RAGDOT_ORDER_MIN_SKEW times their mean rows (`total` rows in all).
RAGDOT_ORDER_FN bool ragdot_mixed_order_pays(long long largest, long long total, long long groups) {
  return groups > 0 && total > 0 && largest * groups >= (long long)RAGDOT_ORDER_MIN_SKEW * total;
}

RAGDOT_ORDER_FN int ragdot_order_pack(int prefix, int segment) {
  return (prefix << RAGDOT_ORDER_SEGMENT_BITS) | segment;
}
RAGDOT_ORDER_FN int ragdot_order_prefix(int packed) { return packed >> RAGDOT_ORDER_SEGMENT_BITS; }
RAGDOT_ORDER_FN int ragdot_order_segment(int packed) {
  return packed & ((1 << RAGDOT_ORDER_SEGMENT_BITS) - 1);
}

// The place in the size-sorted tile list of the tile handed out `u`-th, of `compute_tiles` tiles
// that multiply: the front and the back in turn (0, C-1, 1, C-2, ...). Tiles past them (mode 1's
// zero rows) keep their place.
RAGDOT_ORDER_FN unsigned ragdot_mixed_position(unsigned u, unsigned compute_tiles) {
  if (u >= compute_tiles) return u;
  return (u & 1u) ? compute_tiles - 1u - (u >> 1) : (u >> 1);
}

// Group i's place when `count` groups are sorted by size, largest first, equal sizes in index
// order (a stable sort, so every CTA computes the same order). `size_at(j)` gives group j's size.
template <class SizeAt>
RAGDOT_ORDER_FN int ragdot_size_rank(int i, int count, const SizeAt& size_at) {
  const long long mine = size_at(i);
  int rank = 0;
  for (int j = 0; j < count; ++j) {
    const long long other = size_at(j);
    rank += (other > mine) | ((other == mine) & (j < i));
  }
  return rank;
}
