// The mixed order of mode 1's tiles (kernels/ragdot/tile_order.h), on the host: the hand-out
// positions cover every tile once, front and back in turn; the size ranks are a stable sort,
// largest first; only uneven launches take it; the packed table entries round-trip; and a table built the way the scheduler
// builds it (schedule.cuh) hands out every tile of every group exactly once, the largest group's
// first and the smallest nonempty group's second.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <utility>
#include <vector>

#include "ragdot/tile_order.h"

namespace {

TEST(TileOrder, PositionsTakeFrontAndBackInTurn) {
  for (unsigned c : {0u, 1u, 2u, 3u, 4u, 5u, 16u, 17u, 1000u, 6832u}) {
    std::set<unsigned> seen;
    for (unsigned u = 0; u < c; ++u) {
      const unsigned q = ragdot_mixed_position(u, c);
      ASSERT_LT(q, c);
      seen.insert(q);
      ASSERT_EQ(q, u % 2 == 0 ? u / 2 : c - 1 - u / 2) << "u " << u << " of " << c;
    }
    ASSERT_EQ(seen.size(), c) << c;
    for (unsigned u = c; u < c + 5; ++u) ASSERT_EQ(ragdot_mixed_position(u, c), u);  // zero tiles stay
  }
}

TEST(TileOrder, RanksAreAStableSortLargestFirst) {
  const std::vector<std::vector<long long>> cases = {
      {5}, {0, 0, 0}, {1, 2, 3, 4}, {4, 3, 2, 1}, {7, 0, 7, 3, 7, 0, 1}, {3825, 2882, 0, 20, 20, 19, 3825}};
  for (const auto& sizes : cases) {
    const int n = int(sizes.size());
    std::vector<int> order(std::size_t(n), -1);
    for (int i = 0; i < n; ++i) {
      const int r = ragdot_size_rank(i, n, [&](int j) { return sizes[std::size_t(j)]; });
      ASSERT_GE(r, 0);
      ASSERT_LT(r, n);
      ASSERT_EQ(order[std::size_t(r)], -1) << "two groups ranked " << r;
      order[std::size_t(r)] = i;
    }
    std::vector<int> want(static_cast<std::size_t>(n));
    std::iota(want.begin(), want.end(), 0);
    std::stable_sort(want.begin(), want.end(), [&](int a, int b) { return sizes[std::size_t(a)] > sizes[std::size_t(b)]; });
    EXPECT_EQ(order, want);
  }
}

TEST(TileOrder, PackedEntriesRoundTripWhereTheyFit) {
  const int max_segment = (1 << RAGDOT_ORDER_SEGMENT_BITS) - 1;
  const int max_prefix = (1 << (31 - RAGDOT_ORDER_SEGMENT_BITS)) - 1;
  for (int prefix : {0, 1, 6832, max_prefix}) {
    for (int segment : {0, 1, 257, max_segment}) {
      const int packed = ragdot_order_pack(prefix, segment);
      EXPECT_GE(packed, 0);
      EXPECT_EQ(ragdot_order_prefix(packed), prefix);
      EXPECT_EQ(ragdot_order_segment(packed), segment);
    }
  }
  // packed entries sort as their prefixes do (the scheduler's binary search compares prefixes)
  EXPECT_LT(ragdot_order_pack(5, max_segment), ragdot_order_pack(6, 0));
  EXPECT_TRUE(ragdot_mixed_order_fits(258, 8224));    // deepseek-v3's up projection
  EXPECT_TRUE(ragdot_mixed_order_fits(RAGDOT_ORDER_MAX_GROUPS + 2, max_prefix));
  EXPECT_FALSE(ragdot_mixed_order_fits(RAGDOT_ORDER_MAX_GROUPS + 3, 100));
  EXPECT_FALSE(ragdot_mixed_order_fits(258, max_prefix + 1LL));
  EXPECT_FALSE(ragdot_mixed_order_fits(0, 1));
}

TEST(TileOrder, OnlyUnevenLaunchesPay) {
  // deepseek-v3's benchmark routers: uniform (largest 166 of 32768 rows in 256 groups), skewed (3825)
  EXPECT_FALSE(ragdot_mixed_order_pays(166, 32768, 256));
  EXPECT_TRUE(ragdot_mixed_order_pays(3825, 32768, 256));
  EXPECT_TRUE(ragdot_mixed_order_pays(512, 32768, 256));  // exactly 4x the mean
  EXPECT_FALSE(ragdot_mixed_order_pays(511, 32768, 256));
  EXPECT_TRUE(ragdot_mixed_order_pays(100, 100, 64));    // one group with every row
  EXPECT_FALSE(ragdot_mixed_order_pays(0, 0, 64));       // no rows at all
  EXPECT_FALSE(ragdot_mixed_order_pays(5, 5, 0));
}

// The scheduler's mode 1 table in the mixed order, built on the host as schedule.cuh builds it
// (rank, then tiles per place, then packed prefixes), and the tile it hands out u-th.
struct Handed {
  int segment;
  long long local;
};
std::vector<Handed> hand_out(const std::vector<long long>& rows, long long bm, long long n_tiles, long long head,
                             long long tail) {
  const int L = int(rows.size()), segments = L + 2;
  std::vector<int> table(std::size_t(segments + 1));
  for (int i = 0; i < L; ++i) table[std::size_t(ragdot_size_rank(i, L, [&](int j) { return rows[std::size_t(j)]; }))] = i;
  table[std::size_t(L)] = L, table[std::size_t(L + 1)] = L + 1;
  auto tiles_of = [&](int s) {
    const long long r = s < L ? rows[std::size_t(s)] : s == L ? head : tail;
    return (r + bm - 1) / bm * n_tiles;
  };
  long long run = 0;
  for (int q = 0; q < segments; ++q) {
    const int segment = table[std::size_t(q)];
    table[std::size_t(q)] = ragdot_order_pack(int(run), segment);
    run += tiles_of(segment);
  }
  table[std::size_t(segments)] = ragdot_order_pack(int(run), 0);
  const unsigned compute = unsigned(ragdot_order_prefix(table[std::size_t(L)]));
  std::vector<Handed> out;
  for (long long u = 0; u < run; ++u) {
    const long long t = ragdot_mixed_position(unsigned(u), compute);
    int lo = 0, hi = segments;
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (ragdot_order_prefix(table[std::size_t(mid)]) <= t) lo = mid; else hi = mid;
    }
    out.push_back({ragdot_order_segment(table[std::size_t(lo)]), t - ragdot_order_prefix(table[std::size_t(lo)])});
  }
  return out;
}

TEST(TileOrder, TheTableHandsOutEveryTileOnce) {
  const std::vector<long long> rows = {3825, 2882, 0, 21, 160, 19, 0, 700, 13, 128};
  const long long bm = 128, n_tiles = 3, head = 0, tail = 300;
  const auto handed = hand_out(rows, bm, n_tiles, head, tail);
  std::map<int, std::set<long long>> seen;
  for (const Handed& h : handed) ASSERT_TRUE(seen[h.segment].insert(h.local).second) << h.segment << " " << h.local;
  for (int g = 0; g < int(rows.size()); ++g)
    EXPECT_EQ((long long)seen[g].size(), (rows[std::size_t(g)] + bm - 1) / bm * n_tiles) << "group " << g;
  EXPECT_EQ((long long)seen[int(rows.size()) + 1].size(), (tail + bm - 1) / bm * n_tiles);
  // the front is the largest group, the back the smallest nonempty one; the zero rows come last
  EXPECT_EQ(handed[0].segment, 0);
  EXPECT_EQ(handed[0].local, 0);
  EXPECT_EQ(handed[1].segment, 8);  // 13 rows
  EXPECT_EQ(handed[5].segment, 8);
  EXPECT_EQ(handed[7].segment, 5);  // then 19 rows (the back walks up the sorted list)
  EXPECT_EQ(handed.back().segment, int(rows.size()) + 1);
  // the back half walks a group's tiles in reverse
  EXPECT_EQ(handed[1].local, n_tiles - 1);
  EXPECT_EQ(handed[5].local, 0);
}

}  // namespace
