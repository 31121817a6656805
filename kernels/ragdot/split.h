// The last wave's tiles split along k. A persistent grid of W CTAs takes tiles in order; when the
// tiles are few per CTA and long (mixtral's down projection: ~1100 tiles of 224 k steps on 132
// SMs, 8.4 waves), the last wave's few tiles keep a few SMs busy for a whole tile while the rest
// idle. Each of those tiles is cut into `pieces` runs of its k steps, taken by different CTAs; each
// piece writes its f32 partial sums into a slot of the workspace and counts itself in on the
// tile's counter, and the piece that arrives last adds the slots in piece order (so the result
// does not depend on which one that is) and stores the tile as an unsplit tile would. Plain C++:
// NVRTC compiles it into the kernels, and the host tests it.
//
// Units of work, in the order the tile counter hands them out: the tiles before the last wave
// whole, then the last wave's tiles piece by piece (a tile's pieces adjacent), then the tiles
// after `compute_tiles` (rows no group covers, which only write zeros) whole.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define RAGDOT_SPLIT_FN __host__ __device__ __forceinline__
#else
#define RAGDOT_SPLIT_FN inline
#endif

// Most pieces a tile is cut into (the host sizes the grid and the workspace by it too).
#define RAGDOT_SPLIT_MAX_PIECES 4

// Fewest k steps a piece may have: shorter pieces would spend more on their partial sums' round
// trip through L2 than they save.
#define RAGDOT_SPLIT_MIN_STEPS 4

struct RagdotSplit {
  int first_split;  // units before it are whole tiles with the same index
  int split_end;    // units [first_split, split_end) are pieces of tiles first_split, first_split + 1, ...
  int pieces;       // pieces per split tile (1: nothing is split)
  int total;        // units in all
};

// How to split `compute_tiles` tiles of `k_steps` k steps each (then `tiles - compute_tiles` tiles
// that write zeros) over `ctas` CTAs, at most `max_pieces` per tile. The last wave's `tail` tiles
// are split when every piece still fits in one wave (tail x pieces <= ctas: this also bounds the
// partial-sum slots by the CTA count) and has at least RAGDOT_SPLIT_MIN_STEPS k steps.
RAGDOT_SPLIT_FN RagdotSplit ragdot_split_plan(int tiles, int compute_tiles, int ctas, int k_steps, int max_pieces) {
  RagdotSplit s;
  s.first_split = s.split_end = compute_tiles;
  s.pieces = 1;
  s.total = tiles;
  if (max_pieces < 2 || ctas < 2 || compute_tiles <= 0) return s;
  const int tail = compute_tiles % ctas;
  if (tail == 0) return s;  // whole waves: nothing waits for a short last one
  int pieces = ctas / tail;
  if (pieces > max_pieces) pieces = max_pieces;
  if (pieces > k_steps / RAGDOT_SPLIT_MIN_STEPS) pieces = k_steps / RAGDOT_SPLIT_MIN_STEPS;
  if (pieces < 2) return s;
  s.pieces = pieces;
  s.first_split = compute_tiles - tail;
  s.split_end = s.first_split + tail * pieces;
  s.total = s.split_end + (tiles - compute_tiles);
  return s;
}

// Unit `unit` (< s.total): its tile, its piece (0 for a whole tile) and, for a piece, its slot
// (unit - first_split: tail x pieces slots, a tile's pieces at slot / pieces = its index in the tail).
RAGDOT_SPLIT_FN void ragdot_split_unit(const RagdotSplit* s, int unit, int* tile, int* piece, int* slot) {
  if (unit < s->first_split) {
    *tile = unit, *piece = 0, *slot = -1;
  } else if (unit < s->split_end) {
    const int v = unit - s->first_split;
    *tile = s->first_split + v / s->pieces, *piece = v % s->pieces, *slot = v;
  } else {
    *tile = unit - s->split_end + (s->first_split + (s->split_end - s->first_split) / s->pieces);
    *piece = 0, *slot = -1;
  }
}

// The workspace of a split plan on `ctas` CTAs, which kernel and host share: after the tile
// counter, a counter per split tile and consumer warpgroup (split tiles are at most half a wave),
// then a slot per piece (pieces are at most a wave) of the tile's f32 partial sums, 128 x bn,
// the first warpgroup's 64 rows then the second's.
constexpr RAGDOT_SPLIT_FN long long ragdot_split_counters(int ctas) { return 1 + 2LL * ctas; }
constexpr RAGDOT_SPLIT_FN long long ragdot_split_slot_floats(int bn) { return 128LL * bn; }

// The k steps [*begin, *end) of piece `piece` of `pieces` over `k_steps` steps: as equal as can be.
RAGDOT_SPLIT_FN void ragdot_split_k_steps(int k_steps, int piece, int pieces, int* begin, int* end) {
  *begin = (int)((long long)k_steps * piece / pieces);
  *end = (int)((long long)k_steps * (piece + 1) / pieces);
}
