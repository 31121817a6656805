// Weight-gradient strips. In mode 2 each group's product lhs_g^T rhs_g contracts over the group's
// own rows only: deepseek-v3's groups of ~128 rows give every 128 x 256 output tile two k steps,
// and each tile loads its 64 KiB of B (rhs rows x 256 columns) and 32 KiB of A for 64 KiB of
// output. The tiles then move more bytes out of L2 than they write, and L2, not the tensor cores,
// bounds the kernel. A strip is a run of output tiles of one group and one column tile, taken by
// one CTA: when the group's k steps fit in the B slots that stay in shared memory, B is loaded
// once for the whole strip and only A is loaded per tile (B's bytes drop by the strip's length,
// about 14x). A group with more k steps than slots ("streamed") goes one tile per unit, B loaded
// per k step as before. Plain C++: NVRTC compiles it into the kernels, and the host tests it.
//
// Units of work, in the order the tile counter hands them out: group by group; within a group
// with resident B, column tile by column tile, its strips of m tiles in order; within a streamed
// group, column tile by column tile, its m tiles in order.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define RAGDOT_STRIP_FN __host__ __device__ __forceinline__
#else
#define RAGDOT_STRIP_FN inline
#endif

// Longest strip: a strip is one unit of the in-order hand-out, so its length bounds how long the
// last wave's units run; 16 tiles of 2 k steps are about as long as one mode 1 tile of deepseek-v3.
#define RAGDOT_STRIP_MAX_TILES 16

// Shared memory that holds a strip's B (its k steps of kBN columns): 128 KiB, four slots of a
// 256-column tile (groups of up to 256 rows stay resident), eight of a 128-column one.
#define RAGDOT_STRIP_B_BYTES (128 * 1024)

// B slots of a column tile `bn` wide (one slot per k step of 64 rows, 2 bytes an element).
constexpr RAGDOT_STRIP_FN int ragdot_strip_b_slots(int bn) { return RAGDOT_STRIP_B_BYTES / (bn * 64 * 2); }

// Tiles per strip over `m_tiles` m tiles: the fewest strips of at most RAGDOT_STRIP_MAX_TILES,
// as even as can be (56 m tiles: four strips of 14).
RAGDOT_STRIP_FN int ragdot_strip_tiles(int m_tiles) {
  if (m_tiles <= 0) return 1;
  const int strips = (m_tiles + RAGDOT_STRIP_MAX_TILES - 1) / RAGDOT_STRIP_MAX_TILES;
  return (m_tiles + strips - 1) / strips;
}

// Whether a group of `k_steps` k steps keeps its B resident for `b_slots` slots (an empty group
// does: it loads nothing, and its strips only write zeros).
RAGDOT_STRIP_FN bool ragdot_strip_resident(int k_steps, int b_slots) { return k_steps <= b_slots; }

// Units of a group: strips of its column tiles if resident, else single tiles.
RAGDOT_STRIP_FN long long ragdot_strip_units(int k_steps, int b_slots, int m_tiles, int n_tiles) {
  if (m_tiles <= 0 || n_tiles <= 0) return 0;
  if (!ragdot_strip_resident(k_steps, b_slots)) return (long long)m_tiles * n_tiles;
  const int tiles = ragdot_strip_tiles(m_tiles);
  return (long long)((m_tiles + tiles - 1) / tiles) * n_tiles;
}

// Unit `u` of a group (u < ragdot_strip_units): its column tile, first m tile and m tile count.
RAGDOT_STRIP_FN void ragdot_strip_unit(long long u, bool resident, int m_tiles, int* n_tile, int* m_tile,
                                       int* count) {
  if (!resident) {
    *n_tile = (int)(u / m_tiles);
    *m_tile = (int)(u % m_tiles);
    *count = 1;
    return;
  }
  const int tiles = ragdot_strip_tiles(m_tiles), strips = (m_tiles + tiles - 1) / tiles;
  const int strip = (int)(u % strips);
  *n_tile = (int)(u / strips);
  *m_tile = strip * tiles;
  *count = m_tiles - *m_tile < tiles ? m_tiles - *m_tile : tiles;
}
