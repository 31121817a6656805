// The order in which the tiles of one group (scheduler segment) are handed out. Plain C++: NVRTC
// compiles it into every kernel, and the host tests it.
//
// Tiles that share a weight tile (the same n tile, consecutive m tiles) are adjacent, so that the
// CTAs running them at the same time read the weight tile from DRAM once. That alone reads the
// group's rows (A) once per wave of n tiles in flight: from L2 while they fit there, from DRAM
// again once they do not (a hot expert of a skewed router: deepseek-v3 at s = 1.2 gets thousands
// of rows, tens of MB of A against a 50 MB L2, for 16 n tiles). So a group's m tiles can be taken
// in blocks of `block` (chosen so that one block's rows fit in a share of L2; groups whose rows
// fit keep the plain order): every n tile of the first block, then of the next. Within a block
// the order is as before; a block as wide as the group is the plain order. Weight tiles are then
// read once per block instead of rows once per wave, which pays only where the rows would be
// read more often than the weights (not on mixtral's down projection, say): off by default (the
// host passes a budget only with RAGDOT_CUDA_VARIANT=raster=KiB) until measured.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define RAGDOT_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define RAGDOT_HOST_DEVICE inline
#endif

// The m and n tile of tile `local` (0 <= local < m_tiles * n_tiles < 2^31) of a group with
// m_tiles x n_tiles tiles, taken in blocks of `block` m tiles (block >= 1). 32-bit: the producer
// and consumers compute it for every tile.
RAGDOT_HOST_DEVICE void ragdot_raster_tile(unsigned local, unsigned m_tiles, unsigned n_tiles, unsigned block,
                                           unsigned* m_tile, unsigned* n_tile) {
  if (block >= m_tiles) {  // one block: the plain order
    *m_tile = local % m_tiles;
    *n_tile = local / m_tiles;
    return;
  }
  const unsigned b = local / (block * n_tiles);  // earlier blocks are full
  const unsigned rem = local - b * block * n_tiles;
  const unsigned left = m_tiles - b * block;
  const unsigned width = left < block ? left : block;  // m tiles in this block
  *m_tile = b * block + rem % width;
  *n_tile = rem / width;
}

// m tiles per block for a group whose A rows hold k_len elements each, in tiles of bm rows, when
// a block may hold `lhs_elems` elements of A (0 or less: one block, the plain order). The blocks
// are made about equal (17 tiles in blocks of at most 16 go as 9 + 8, not 16 + 1): a block of a
// few tiles would read the group's weights once more for little reuse.
RAGDOT_HOST_DEVICE unsigned ragdot_raster_block(long long lhs_elems, long long bm, long long k_len, unsigned m_tiles) {
  if (m_tiles == 0) return 1;
  // the whole group fits (the common case): no division, this runs for every tile
  if (lhs_elems <= 0 || k_len <= 0 || lhs_elems >= (long long)m_tiles * bm * k_len) return m_tiles;
  const long long most = lhs_elems / (bm * k_len);  // the widest block that fits
  const unsigned widest = most < 1 ? 1u : (unsigned)most;
  const unsigned blocks = (m_tiles + widest - 1) / widest;
  return (m_tiles + blocks - 1) / blocks;
}
