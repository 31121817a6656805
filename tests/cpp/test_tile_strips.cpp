// How the weight-gradient strips (kernels/ragdot/strips.h) cut a group's output tiles into units,
// on the host: every (m tile, column tile) of every group exactly once, strips only where the
// group's k steps fit in B's slots, no strip longer than RAGDOT_STRIP_MAX_TILES or empty, a
// column tile's strips adjacent and in m order.
#include <gtest/gtest.h>

#include <map>
#include <tuple>
#include <vector>

#include "ragdot/strips.h"

namespace {

TEST(TileStrips, SlotsHoldOneHundredTwentyEightKiBOfB) {
  EXPECT_EQ(ragdot_strip_b_slots(256), 4);  // groups of up to 256 rows keep B resident
  EXPECT_EQ(ragdot_strip_b_slots(128), 8);
  EXPECT_EQ(ragdot_strip_b_slots(192), 5);
  EXPECT_EQ(ragdot_strip_b_slots(64), 16);
  for (int bn : {64, 128, 192, 256}) EXPECT_LE(ragdot_strip_b_slots(bn) * bn * 64 * 2, RAGDOT_STRIP_B_BYTES);
}

TEST(TileStrips, StripsAreEvenAndNeverEmpty) {
  EXPECT_EQ(ragdot_strip_tiles(56), 14);  // deepseek-v3's 7168 rows: four strips of 14
  EXPECT_EQ(ragdot_strip_tiles(16), 16);
  EXPECT_EQ(ragdot_strip_tiles(17), 9);
  EXPECT_EQ(ragdot_strip_tiles(1), 1);
  for (int m_tiles = 1; m_tiles <= 300; ++m_tiles) {
    const int tiles = ragdot_strip_tiles(m_tiles), strips = (m_tiles + tiles - 1) / tiles;
    EXPECT_GE(tiles, 1);
    EXPECT_LE(tiles, RAGDOT_STRIP_MAX_TILES) << m_tiles;
    EXPECT_EQ(strips, (m_tiles + RAGDOT_STRIP_MAX_TILES - 1) / RAGDOT_STRIP_MAX_TILES) << m_tiles << ": fewest strips";
    EXPECT_GT(m_tiles - (strips - 1) * tiles, 0) << m_tiles << ": an empty last strip";
    EXPECT_LT(strips * tiles - m_tiles, strips) << m_tiles << ": uneven strips";
  }
}

TEST(TileStrips, EveryTileOfEveryGroupOnce) {
  int resident_groups = 0, streamed_groups = 0;
  for (int slots : {2, 4, 8}) {
    for (int m_tiles : {1, 2, 7, 16, 17, 56, 57}) {
      for (int n_tiles : {1, 3, 16}) {
        for (int k_steps : {0, 1, 2, 3, 4, 5, 8, 9, 64}) {
          SCOPED_TRACE(::testing::Message() << slots << " slots, " << m_tiles << " x " << n_tiles << " tiles, "
                                            << k_steps << " k steps");
          const bool resident = ragdot_strip_resident(k_steps, slots);
          EXPECT_EQ(resident, k_steps <= slots);
          resident_groups += resident;
          streamed_groups += !resident;
          const long long units = ragdot_strip_units(k_steps, slots, m_tiles, n_tiles);
          std::map<std::pair<int, int>, int> seen;  // (m tile, n tile) -> times
          int last_n = -1, next_m = 0;
          for (long long u = 0; u < units; ++u) {
            int n_tile = -1, m_tile = -1, count = -1;
            ragdot_strip_unit(u, resident, m_tiles, &n_tile, &m_tile, &count);
            ASSERT_GE(count, 1) << "unit " << u;
            EXPECT_LE(count, resident ? RAGDOT_STRIP_MAX_TILES : 1) << "unit " << u;
            ASSERT_GE(n_tile, 0);
            ASSERT_LT(n_tile, n_tiles);
            if (n_tile != last_n) {
              EXPECT_EQ(n_tile, last_n + 1) << "unit " << u << ": column tiles in order";
              EXPECT_EQ(next_m, last_n < 0 ? 0 : m_tiles) << "unit " << u << ": the column before was not finished";
              last_n = n_tile, next_m = 0;
            }
            EXPECT_EQ(m_tile, next_m) << "unit " << u << ": a column's m tiles in order, adjacent";
            for (int i = 0; i < count; ++i) ++seen[{m_tile + i, n_tile}];
            next_m = m_tile + count;
          }
          EXPECT_EQ(next_m, m_tiles);
          EXPECT_EQ(int(seen.size()), m_tiles * n_tiles);
          for (const auto& [tile, times] : seen) {
            EXPECT_EQ(times, 1) << "tile " << tile.first << "," << tile.second;
            EXPECT_LT(tile.first, m_tiles);
          }
        }
      }
    }
  }
  EXPECT_GT(resident_groups, 0);
  EXPECT_GT(streamed_groups, 0);
}

TEST(TileStrips, NoTilesNoUnits) {
  EXPECT_EQ(ragdot_strip_units(2, 4, 0, 16), 0);
  EXPECT_EQ(ragdot_strip_units(2, 4, 56, 0), 0);
  EXPECT_EQ(ragdot_strip_units(9, 4, 56, 16), 56 * 16);  // streamed: a unit per tile
  EXPECT_EQ(ragdot_strip_units(2, 4, 56, 16), 4 * 16);   // resident: four strips per column tile
}

}  // namespace
