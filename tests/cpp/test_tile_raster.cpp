// The order in which GPU kernels hand out a group's tiles (kernels/ragdot/raster.h), on the host:
// every tile exactly once, the plain order when a block spans the group, and blocks of m tiles
// that each finish all their n tiles before the next block starts.
#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

#include "ragdot/raster.h"

namespace {

std::vector<std::pair<unsigned, unsigned>> order(unsigned m_tiles, unsigned n_tiles, unsigned block) {
  std::vector<std::pair<unsigned, unsigned>> tiles;
  for (unsigned t = 0; t < m_tiles * n_tiles; ++t) {
    unsigned m = 0, n = 0;
    ragdot_raster_tile(t, m_tiles, n_tiles, block, &m, &n);
    tiles.emplace_back(m, n);
  }
  return tiles;
}

TEST(TileRaster, EveryTileOnceInBlocksOfMTiles) {
  for (unsigned m_tiles : {1u, 2u, 7u, 16u, 65u}) {
    for (unsigned n_tiles : {1u, 3u, 16u}) {
      for (unsigned block : {1u, 2u, 5u, 13u, 16u, 100u}) {
        const auto tiles = order(m_tiles, n_tiles, block);
        std::set<std::pair<unsigned, unsigned>> seen(tiles.begin(), tiles.end());
        ASSERT_EQ(seen.size(), tiles.size()) << m_tiles << "x" << n_tiles << " block " << block;
        for (const auto& [m, n] : tiles) {
          ASSERT_LT(m, m_tiles);
          ASSERT_LT(n, n_tiles);
        }
        // blocks in order: a tile's block never comes before an earlier tile's
        const unsigned width = block < m_tiles ? block : m_tiles;
        for (std::size_t i = 1; i < tiles.size(); ++i) ASSERT_LE(tiles[i - 1].first / width, tiles[i].first / width);
        // within a block, the m tiles of one n tile are adjacent (they share the weight tile)
        for (std::size_t i = 0; i < tiles.size();) {
          const unsigned b = tiles[i].first / width, in_block = std::min(width, m_tiles - b * width);
          for (unsigned j = 0; j < in_block; ++j) {
            ASSERT_EQ(tiles[i + j].second, tiles[i].second) << "tile " << i + j;
            ASSERT_EQ(tiles[i + j].first, b * width + j) << "tile " << i + j;
          }
          i += in_block;
        }
      }
    }
  }
}

TEST(TileRaster, OneBlockIsThePlainOrder) {
  const auto tiles = order(7, 3, 7);
  for (unsigned t = 0; t < tiles.size(); ++t) {
    EXPECT_EQ(tiles[t].first, t % 7);
    EXPECT_EQ(tiles[t].second, t / 7);
  }
  EXPECT_EQ(order(7, 3, 1000), tiles);
}

TEST(TileRaster, BlocksFitTheBudgetAndAreAboutEqual) {
  // deepseek-v3's rows (k = 7168, 16-bit) in 128-row tiles, half of a 50 MiB L2: at most 14
  // tiles a block, so a hot group of 65 tiles goes in 5 blocks of 13
  const long long elems = (50ll << 20) / 2 / 2;
  EXPECT_EQ(ragdot_raster_block(elems, 128, 7168, 65), 13u);
  EXPECT_EQ(ragdot_raster_block(elems, 128, 7168, 15), 8u);   // 8 + 7, not 14 + 1
  EXPECT_EQ(ragdot_raster_block(elems, 128, 7168, 14), 14u);  // fits: the plain order
  EXPECT_EQ(ragdot_raster_block(elems, 128, 7168, 4), 4u);
  // mixtral (k = 4096): 25 tiles fit, so its ~16-tile groups keep the plain order
  EXPECT_EQ(ragdot_raster_block(elems, 128, 4096, 17), 17u);
  EXPECT_EQ(ragdot_raster_block(0, 128, 7168, 65), 65u);   // off: the plain order
  EXPECT_EQ(ragdot_raster_block(elems, 128, 0, 65), 65u);  // an empty k range reads no rows
  EXPECT_EQ(ragdot_raster_block(10, 128, 7168, 65), 1u);   // at least one tile
  EXPECT_EQ(ragdot_raster_block(elems, 128, 7168, 0), 1u);
  for (unsigned m_tiles = 1; m_tiles < 200; ++m_tiles) {
    for (long long most : {1ll, 2ll, 3ll, 7ll, 16ll}) {
      const unsigned block = ragdot_raster_block(most * 128 * 64, 128, 64, m_tiles);
      ASSERT_GE(block, 1u);
      ASSERT_LE(block, most < m_tiles ? most : m_tiles) << m_tiles << " tiles, at most " << most;
      // no more blocks than the fewest that fit, and no narrower than needed for that
      const long long fewest = (m_tiles + most - 1) / most;
      ASSERT_EQ((m_tiles + block - 1) / block, fewest) << m_tiles << " tiles, at most " << most;
      ASSERT_EQ(block, (m_tiles + fewest - 1) / fewest) << m_tiles << " tiles, at most " << most;
    }
  }
}

}  // namespace
