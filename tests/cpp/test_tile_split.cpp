// How the GPU kernels split the last wave's tiles along k (kernels/ragdot/split.h), on the host:
// every k step of every tile done exactly once, pieces only where the last wave is short, never
// more pieces than fit in one wave or have RAGDOT_SPLIT_MIN_STEPS k steps each, and the zero
// tiles after the computed ones whole.
#include <gtest/gtest.h>

#include <map>
#include <utility>
#include <vector>

#include "ragdot/split.h"

namespace {

struct Covered {
  std::map<int, std::vector<std::pair<int, int>>> steps;  // tile -> its pieces' k steps, in unit order
  std::map<int, std::vector<int>> slots;                  // tile -> its pieces' slots
};

Covered walk(const RagdotSplit& s, int k_steps) {
  Covered c;
  for (int u = 0; u < s.total; ++u) {
    int tile = -1, piece = -1, slot = -2;
    ragdot_split_unit(&s, u, &tile, &piece, &slot);
    int begin = 0, end = k_steps;
    if (slot >= 0) ragdot_split_k_steps(k_steps, piece, s.pieces, &begin, &end);
    EXPECT_EQ(piece, int(c.steps[tile].size())) << "unit " << u << ": a tile's pieces come in order, adjacent";
    c.steps[tile].emplace_back(begin, end);
    if (slot >= 0) c.slots[tile].push_back(slot);
  }
  return c;
}

TEST(TileSplit, EveryStepOfEveryTileOnce) {
  for (int ctas : {1, 2, 7, 132}) {
    for (int compute : {0, 1, 5, 66, 67, 131, 132, 133, 1104, 7728}) {
      for (int zeros : {0, 3}) {
        for (int k_steps : {1, 4, 7, 8, 15, 64, 224}) {
          for (int most : {1, 2, 4}) {
            const RagdotSplit s = ragdot_split_plan(compute + zeros, compute, ctas, k_steps, most);
            SCOPED_TRACE(::testing::Message() << compute << "+" << zeros << " tiles, " << ctas << " CTAs, " << k_steps
                                              << " k steps, at most " << most << " pieces");
            ASSERT_GE(s.pieces, 1);
            ASSERT_LE(s.pieces, most < 1 ? 1 : most);
            const Covered c = walk(s, k_steps);
            ASSERT_EQ(int(c.steps.size()), compute + zeros);  // every tile, and no other
            int split_tiles = 0;
            for (const auto& [tile, runs] : c.steps) {
              ASSERT_GE(tile, 0);
              ASSERT_LT(tile, compute + zeros);
              // the pieces tile [0, k_steps) in order, none empty
              int next = 0;
              for (const auto& [b, e] : runs) {
                EXPECT_EQ(b, next) << "tile " << tile;
                EXPECT_GT(e, b) << "tile " << tile;
                next = e;
              }
              EXPECT_EQ(next, k_steps) << "tile " << tile;
              if (runs.size() > 1) {
                ++split_tiles;
                EXPECT_LT(tile, compute) << "a zero tile split";
                EXPECT_EQ(int(runs.size()), s.pieces);
                for (const auto& [b, e] : runs) EXPECT_GE(e - b, RAGDOT_SPLIT_MIN_STEPS);
                // its slots: pieces adjacent, slot / pieces its place among the split tiles
                const auto& slots = c.slots.at(tile);
                for (int q = 0; q < s.pieces; ++q) {
                  EXPECT_EQ(slots[q], slots[0] + q);
                  EXPECT_EQ(slots[q] / s.pieces, tile - s.first_split);
                }
              }
            }
            // slots and counters fit what the host sets aside: a wave of slots, half a wave of tiles
            if (s.pieces > 1) {
              EXPECT_LE(split_tiles * s.pieces, ctas);
              EXPECT_LE(2 * split_tiles, ctas);
              EXPECT_EQ(split_tiles, compute % ctas) << "only the last wave's tiles";
            } else {
              EXPECT_EQ(split_tiles, 0);
              EXPECT_EQ(s.total, compute + zeros);
            }
          }
        }
      }
    }
  }
}

TEST(TileSplit, ShortLastWavesOfLongTilesAreSplit) {
  // mixtral's down projection on an H200: 1104 tiles of 224 k steps on 132 CTAs, 48 in the last
  // wave: cut in two, they fill 96 CTAs for half a tile instead of 48 for a whole one
  RagdotSplit s = ragdot_split_plan(1104 + 2, 1104, 132, 224, 4);
  EXPECT_EQ(s.pieces, 2);
  EXPECT_EQ(s.first_split, 1056);
  EXPECT_EQ(s.split_end, 1056 + 96);
  EXPECT_EQ(s.total, 1056 + 96 + 2);
  // a last wave of 8 tiles: four pieces each (the most)
  EXPECT_EQ(ragdot_split_plan(6080, 6080, 132, 112, 4).pieces, 4);
  // whole waves, a last wave over half full, or tiles too short: nothing split
  EXPECT_EQ(ragdot_split_plan(1056, 1056, 132, 224, 4).pieces, 1);
  EXPECT_EQ(ragdot_split_plan(7728, 7728, 132, 64, 4).pieces, 1);  // 72 of 132 in the last wave
  EXPECT_EQ(ragdot_split_plan(1104, 1104, 132, 7, 4).pieces, 1);   // 7 k steps: no two pieces of 4
  EXPECT_EQ(ragdot_split_plan(1104, 1104, 132, 224, 1).pieces, 1);  // not asked for
  // fewer tiles than CTAs: the idle CTAs take pieces
  EXPECT_EQ(ragdot_split_plan(30, 30, 132, 64, 4).pieces, 4);
  EXPECT_EQ(ragdot_split_plan(50, 50, 132, 64, 4).pieces, 2);
}

}  // namespace
