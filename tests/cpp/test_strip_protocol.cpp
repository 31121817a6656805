// The weight-gradient strips' barrier protocol (kernels/ragdot/wgmma_strips.cuh), played out on the
// host (barrier_model.hpp): the producer thread and the eight warps of the two consumer warpgroups
// of one CTA as sequences of mbarrier operations, in the order the kernel issues them, and the TMA
// loads landing later, interleaved at random (some runs with one warp slow). Each run must finish (no wait that nothing will ever satisfy),
// every wgmma must find the tile it expects in its A stage and B slot, and no slot may be refilled
// before its last reader let it go. The unit geometry comes from kernels/ragdot/strips.h itself;
// the loops mirror the kernel's (an edit to the kernel's order of loads or releases belongs here
// too). The model is sharp at the kernel's bound: A run kAStages - 1 steps ahead of B, one more
// than the kernel allows, deadlocks in the first test.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "barrier_model.hpp"
#include "ragdot/strips.h"

namespace {

using namespace ragdot::barrier_model;  // Barrier, NamedBarrier, Program, TileRing, World, play

long long tag_a(std::size_t unit, int tile, int kt) { return (static_cast<long long>(unit) * 64 + tile) * 1024 + kt; }
long long tag_b(std::size_t unit, int tile, int kt) { return tag_a(unit, tile, kt) * 2 + 1; }

struct Unit {
  int k_steps, count;
  bool resident;
};

// One CTA's shared memory: both rings' barriers and what each stage or slot holds, the tile ring,
// the consumers' named barrier (bar.sync 1, 256).
struct Cta {
  int a_stages, b_slots;
  std::vector<Barrier> full_a, empty_a, full_b, empty_b;
  std::vector<long long> a_tag, b_tag;
  TileRing ring{8};  // every consumer warp reads a slot
  NamedBarrier consumers, wgmma[2];  // bar.sync 1, 256 (eight warps); each warpgroup's wgmma issue

  Cta(int a, int b)
      : a_stages(a), b_slots(b), full_a(std::size_t(a)), empty_a(std::size_t(a)), full_b(std::size_t(b)),
        empty_b(std::size_t(b)), a_tag(std::size_t(a), -1), b_tag(std::size_t(b), -1) {
    for (auto* v : {&empty_a, &empty_b})
      for (auto& bar : *v) bar.init(2);  // thread 0 of each consumer warpgroup
    consumers.count = 8;
    wgmma[0].count = wgmma[1].count = 4;
  }
};

// Deliberate mistakes, to show the model catches them: `a_first` loads all of a tile's A before
// its B; `b_back_each_tile` gives a resident strip's B slots back after every tile.
struct Mistakes {
  bool a_first = false, b_back_each_tile = false;
};

// The producer, as Strips::produce issues its operations (and next_tile its ring slots).
Program producer(World& world, Cta& c, const std::vector<Unit>& units, Mistakes m) {
  Program p{&world, {}};
  const std::uint32_t P = std::uint32_t(c.a_stages), R = std::uint32_t(c.b_slots);
  std::uint32_t ia = 0, ib = 0;
  for (std::size_t n = 0; n <= units.size(); ++n) {
    p.ring_put(&c.ring, n, n < units.size() ? static_cast<long long>(n) : -1);
    if (n == units.size()) break;
    const Unit& w = units[n];
    for (int i = 0; i < w.count; ++i) {
      const bool with_b = i == 0 || !w.resident;
      const int lag = !with_b ? 0 : m.a_first ? w.k_steps : c.a_stages - 2;
      for (int j = 0; j < w.k_steps + lag; ++j) {
        if (j < w.k_steps) {
          const std::uint32_t a = ia + std::uint32_t(j);
          p.wait(&c.empty_a[a % P], int((a / P) & 1) ^ 1);
          p.load(&c.full_a[a % P], &c.a_tag[a % P], tag_a(n, i, j));
        }
        if (with_b && j >= lag) {
          const std::uint32_t b = ib + std::uint32_t(j - lag);
          p.wait(&c.empty_b[b % R], int((b / R) & 1) ^ 1);
          p.load(&c.full_b[b % R], &c.b_tag[b % R], tag_b(n, w.resident ? 0 : i, j - lag));
        }
      }
      ia += std::uint32_t(w.k_steps);
      if (!w.resident) ib += std::uint32_t(w.k_steps);
    }
    if (w.resident) ib += std::uint32_t(w.k_steps);
  }
  return p;
}

// One warp (0..3) of consumer warpgroup `wg`, as Strips::consume and Kernel::k_protocol issue its
// operations: every warp waits; wgmma is the warpgroup's four warps together, its reads of the
// stage and slot checked when the last of them issues; thread 0 (warp 0) arrives, checking first
// that the slots it gives back still hold what was read. `partial`: whether a unit's last k step
// runs past its group (the tail is cleared, the two warpgroups' eight warps meeting).
Program consumer(World& world, Cta& c, const std::vector<Unit>& units, const std::vector<bool>& partial, Mistakes m,
                 int wg, int warp) {
  Program p{&world, {}};
  const std::uint32_t P = std::uint32_t(c.a_stages), R = std::uint32_t(c.b_slots);
  World* wld = &world;
  std::uint32_t ia = 0, ib = 0;
  for (std::size_t n = 0; n <= units.size(); ++n) {
    p.ring_take(&c.ring, n, n < units.size() ? static_cast<long long>(n) : -1);
    if (n == units.size()) break;
    const Unit& w = units[n];
    for (int i = 0; i < w.count; ++i) {
      auto release = [&](std::uint32_t a, int kt) {
        if (warp != 0) return;
        p.check(&c.a_tag[a % P], tag_a(n, i, kt), "A stage at its release");
        p.arrive(&c.empty_a[a % P]);
        if (!w.resident) {
          const std::uint32_t b = ib + std::uint32_t(kt);
          p.check(&c.b_tag[b % R], tag_b(n, i, kt), "B slot at its release");
          p.arrive(&c.empty_b[b % R]);
        }
      };
      for (int kt = 0; kt < w.k_steps; ++kt, ++ia) {
        const std::uint32_t b = ib + std::uint32_t(kt);
        p.wait(&c.full_a[ia % P], int((ia / P) & 1));
        p.wait(&c.full_b[b % R], int((b / R) & 1));
        if (partial[n] && kt == w.k_steps - 1) p.sync(&c.consumers);
        const long long* a_slot = &c.a_tag[ia % P];
        const long long* b_slot = &c.b_tag[b % R];
        const long long want_a = tag_a(n, i, kt), want_b = tag_b(n, w.resident ? 0 : i, kt);
        p.sync(&c.wgmma[wg], [wld, a_slot, b_slot, want_a, want_b] {
          if (*a_slot != want_a) wld->fail("A stage at wgmma holds " + std::to_string(*a_slot));
          if (*b_slot != want_b) wld->fail("B slot at wgmma holds " + std::to_string(*b_slot));
        });
        if (kt > 0) release(ia - 1, kt - 1);
      }
      if (w.k_steps > 0) release(ia - 1, w.k_steps - 1);
      if (!w.resident) {
        ib += std::uint32_t(w.k_steps);
      } else if ((i == w.count - 1 || m.b_back_each_tile) && warp == 0) {
        for (int kt = 0; kt < w.k_steps; ++kt) {
          const std::uint32_t b = ib + std::uint32_t(kt);
          p.check(&c.b_tag[b % R], tag_b(n, 0, kt), "resident B slot at its release");
          p.arrive(&c.empty_b[b % R]);
        }
      }
      // the epilogue: register stores, no barrier (the warps may drift apart here)
    }
    if (w.resident) ib += std::uint32_t(w.k_steps);
  }
  return p;
}

// `slow`: warp `slow % 4` of warpgroup `slow / 4` runs at a tenth of the others' pace, or none (-1).
std::string play(int a_stages, int b_slots, const std::vector<Unit>& units, const std::vector<bool>& partial,
                 std::uint64_t seed, Mistakes m = {}, int slow = -1) {
  World world;
  Cta c(a_stages, b_slots);
  std::vector<Program> programs = {producer(world, c, units, m)};
  for (int wg = 0; wg < 2; ++wg)
    for (int warp = 0; warp < 4; ++warp) programs.push_back(consumer(world, c, units, partial, m, wg, warp));
  return ragdot::barrier_model::play(world, programs, seed, one_slow(programs.size(), slow < 0 ? -1 : 1 + slow % 8));
}

// One CTA's units from random group sizes: every `stride`-th unit of the in-order hand-out, from
// `first` (the other CTAs take the rest), each with its group's k steps and its strip's tiles.
std::vector<Unit> cta_units(const std::vector<int>& rows, int bn, int m_tiles, int n_tiles, int first, int stride,
                            std::vector<bool>* partial) {
  std::vector<Unit> all;
  std::vector<bool> tails;
  const int slots = ragdot_strip_b_slots(bn);
  for (int r : rows) {
    const int k_steps = (r + 63) / 64;
    const bool resident = ragdot_strip_resident(k_steps, slots);
    const long long units = ragdot_strip_units(k_steps, slots, m_tiles, n_tiles);
    for (long long u = 0; u < units; ++u) {
      int n_tile = 0, m_tile = 0, count = 0;
      ragdot_strip_unit(u, resident, m_tiles, &n_tile, &m_tile, &count);
      all.push_back({k_steps, count, resident});
      tails.push_back(r % 64 != 0);
    }
  }
  std::vector<Unit> mine;
  for (std::size_t u = std::size_t(first); u < all.size(); u += std::size_t(stride)) {
    mine.push_back(all[u]);
    partial->push_back(tails[u]);
  }
  return mine;
}

TEST(StripProtocol, EveryInterleavingFinishesAndReadsWhatWasLoaded) {
  std::mt19937_64 rng(5);
  int runs = 0, resident_units = 0, streamed_units = 0;
  for (int bn : {64, 128, 192, 256}) {
    for (int a_stages : {2, 3, 4, 5, 6}) {
      for (int trial = 0; trial < 12; ++trial) {
        // groups of 0 to ~700 rows: empty, resident (up to 4 to 16 k steps), streamed
        std::vector<int> rows(1 + rng() % 6);
        for (int& r : rows) r = rng() % 5 == 0 ? 0 : int(rng() % 700);
        const int m_tiles = 1 + int(rng() % 20), n_tiles = 1 + int(rng() % 3), stride = 1 + int(rng() % 4);
        std::vector<bool> partial;
        const std::vector<Unit> units = cta_units(rows, bn, m_tiles, n_tiles, int(rng() % stride), stride, &partial);
        for (const Unit& u : units) (u.resident ? resident_units : streamed_units)++;
        const int slow = int(rng() % 9) - 1;
        const std::string result = play(a_stages, ragdot_strip_b_slots(bn), units, partial, rng(), {}, slow);
        ASSERT_EQ(result, "") << "bn " << bn << ", " << a_stages << " A stages, trial " << trial;
        ++runs;
      }
    }
  }
  EXPECT_EQ(runs, 4 * 5 * 12);
  EXPECT_GT(resident_units, 100);
  EXPECT_GT(streamed_units, 100);
}

// The model can fail: a producer that loads all of a tile's A before its B (the order the kernel
// avoids) waits in a circle once a tile has more k steps than A stages; consumers that give a
// resident strip's B slots back after each tile, not after its last, let the producer refill
// them under the strip's later tiles (or arrive too often).
TEST(StripProtocol, TheModelCatchesAWrongOrder) {
  const std::vector<Unit> streamed = {{9, 1, false}, {9, 1, false}};
  const std::vector<bool> whole = {false, false};
  EXPECT_EQ(play(2, 4, streamed, whole, 1), "");
  Mistakes a_first;
  a_first.a_first = true;
  EXPECT_EQ(play(2, 4, streamed, whole, 1, a_first).rfind("deadlock", 0), 0u);
  // resident strips of 3 k steps and 3 tiles on 4 slots (each strip's B takes a slot of the one
  // before), 6 A stages: the producer runs a tile ahead
  const std::vector<Unit> strips(6, Unit{3, 3, true});
  const std::vector<bool> tails(6, false);
  Mistakes early;
  early.b_back_each_tile = true;
  int caught = 0;
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    EXPECT_EQ(play(6, 4, strips, tails, seed), "") << seed;
    caught += !play(6, 4, strips, tails, seed, early).empty();
  }
  EXPECT_GT(caught, 5) << "releasing B after each tile went unnoticed";
}

}  // namespace
