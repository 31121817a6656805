// The expert-parallel exchange the NCCL tests check, on the host: every rank makes its (token,
// slot) pairs from a seeded rule every other rank can replay, sorted by expert, one row of
// uint32 words per pair that names its rank, pair and word. What each rank must receive, what
// must come back after the expert's rank changes every row, and the slots of a padded plan follow.
// Routing is skewed; expert 1 gets no rows; with 2 ranks or more the last rank's experts get none
// (a rank that receives nothing); with 3 or more rank 0 sends nothing to rank 1.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "ragdot/ep_transport.hpp"

namespace ragdot::ep_scenario {

constexpr int kLocalExperts = 4;
constexpr int kTopK = 2;
constexpr int kRowWords = 24;  // uint32 per row: 96 bytes
constexpr std::int64_t kRowBytes = kRowWords * sizeof(std::uint32_t);

struct RankPairs {
  std::vector<int> expert;           // [pairs], sorted
  std::vector<std::uint32_t> rows;   // [pairs, kRowWords]
  std::vector<std::int32_t> counts;  // [experts]
};

inline std::uint32_t mix(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  return x ^ (x >> 16);
}

inline RankPairs make_pairs(int rank, int world) {
  const int experts = kLocalExperts * world;
  const int pairs = (50 + 17 * rank) * kTopK;
  std::vector<std::pair<int, int>> by_expert;  // (expert, pair index)
  for (int i = 0; i < pairs; ++i) {
    const double u = double(mix(std::uint32_t(rank * 100003 + i)) % 1000) / 1000.0;
    int e = int(u * u * experts);                                          // skewed toward the low experts
    if (world >= 2 && e / kLocalExperts == world - 1) e %= kLocalExperts;  // the last rank gets nothing
    if (world >= 3 && rank == 0 && e / kLocalExperts == 1) e = 0;          // rank 0 sends rank 1 nothing
    if (e == 1) e = 0;                                                     // expert 1 gets nothing
    by_expert.emplace_back(e, i);
  }
  std::stable_sort(by_expert.begin(), by_expert.end(), [](auto a, auto b) { return a.first < b.first; });
  RankPairs p;
  p.counts.assign(std::size_t(experts), 0);
  for (auto [e, i] : by_expert) {
    p.expert.push_back(e);
    ++p.counts[std::size_t(e)];
    for (int h = 0; h < kRowWords; ++h) {
      p.rows.push_back(std::uint32_t(rank) << 24 | std::uint32_t(i) << 8 | std::uint32_t(h));
    }
  }
  return p;
}

// What the expert's rank does to a row before sending it back: a change that names that rank.
inline std::uint32_t processed(std::uint32_t v, int expert_rank) { return v ^ (0x5a000000U + std::uint32_t(expert_rank)); }

// What rank `me` receives: the rows in dispatch's order (by source rank, then as the source sorted
// them) and the counts [world, local].
struct Expected {
  std::vector<std::uint32_t> rows;
  std::vector<std::int32_t> recv_counts;
};

inline Expected expected_at(int me, int world) {
  Expected x;
  for (int s = 0; s < world; ++s) {
    const RankPairs p = make_pairs(s, world);
    for (int l = 0; l < kLocalExperts; ++l) x.recv_counts.push_back(p.counts[std::size_t(me * kLocalExperts + l)]);
    for (std::size_t j = 0; j < p.expert.size(); ++j) {
      if (p.expert[j] / kLocalExperts != me) continue;
      x.rows.insert(x.rows.end(), p.rows.begin() + std::ptrdiff_t(j * kRowWords),
                    p.rows.begin() + std::ptrdiff_t((j + 1) * kRowWords));
    }
  }
  return x;
}

// What rank `me` receives in the by-expert layout: each local expert's rows, by source rank.
inline std::vector<std::uint32_t> expected_by_expert(int me, int world) {
  std::vector<std::uint32_t> rows;
  std::vector<RankPairs> all;
  for (int s = 0; s < world; ++s) all.push_back(make_pairs(s, world));
  for (int l = 0; l < kLocalExperts; ++l) {
    for (const RankPairs& p : all) {
      for (std::size_t j = 0; j < p.expert.size(); ++j) {
        if (p.expert[j] != me * kLocalExperts + l) continue;
        rows.insert(rows.end(), p.rows.begin() + std::ptrdiff_t(j * kRowWords),
                    p.rows.begin() + std::ptrdiff_t((j + 1) * kRowWords));
      }
    }
  }
  return rows;
}

// What rank `me` receives in `layout`.
inline std::vector<std::uint32_t> expected_rows(int me, int world, ep::Layout layout) {
  return layout == ep::Layout::kByExpert ? expected_by_expert(me, world) : expected_at(me, world).rows;
}

// A rank's rows as they must come back after combine.
inline std::vector<std::uint32_t> expected_back(const RankPairs& mine) {
  std::vector<std::uint32_t> back = mine.rows;
  for (std::size_t j = 0; j < mine.expert.size(); ++j) {
    for (int h = 0; h < kRowWords; ++h) {
      auto& v = back[j * kRowWords + std::size_t(h)];
      v = processed(v, mine.expert[j] / kLocalExperts);
    }
  }
  return back;
}

// Rows per slot for a padded plan: the most any rank sends to one rank.
inline std::int64_t padded_capacity(int world) {
  std::int64_t cap = 0;
  for (int r = 0; r < world; ++r) cap = std::max<std::int64_t>(cap, std::int64_t(make_pairs(r, world).expert.size()));
  return cap;
}

// The valid rows of slot s of `slots` ([world, cap, kRowWords]): rows[s] rows per slot.
inline std::vector<std::uint32_t> unslot(const std::vector<std::uint32_t>& slots, const std::vector<std::int64_t>& rows,
                                         std::int64_t cap) {
  std::vector<std::uint32_t> out;
  for (std::size_t s = 0; s < rows.size(); ++s) {
    const auto at = std::ptrdiff_t(std::int64_t(s) * cap * kRowWords);
    out.insert(out.end(), slots.begin() + at, slots.begin() + at + std::ptrdiff_t(rows[s] * kRowWords));
  }
  return out;
}

// `packed` (rows[s] rows for each s, one after the other) spread into slots of cap rows; the
// rest of each slot is `fill`.
inline std::vector<std::uint32_t> slot(const std::vector<std::uint32_t>& packed, const std::vector<std::int64_t>& rows,
                                       std::int64_t cap, std::uint32_t fill = 0xdeadbeefU) {
  std::vector<std::uint32_t> out(rows.size() * std::size_t(cap * kRowWords), fill);
  std::size_t from = 0;
  for (std::size_t s = 0; s < rows.size(); ++s) {
    const auto n = std::size_t(rows[s] * kRowWords);
    std::copy_n(packed.begin() + std::ptrdiff_t(from), n, out.begin() + std::ptrdiff_t(std::int64_t(s) * cap * kRowWords));
    from += n;
  }
  return out;
}

inline std::vector<std::uint32_t> processed_rows(std::vector<std::uint32_t> rows, int expert_rank) {
  for (auto& v : rows) v = processed(v, expert_rank);
  return rows;
}

}  // namespace ragdot::ep_scenario
