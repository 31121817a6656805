// The weight-gradient strips' barrier protocol (kernels/ragdot/wgmma_strips.cuh), played out on the
// host: the producer thread and the two consumer warpgroups of one CTA as sequences of mbarrier
// operations, in the order the kernel issues them, and the TMA loads landing later, interleaved
// at random. Each run must finish (no wait that nothing will ever satisfy), every wgmma must find
// the tile it expects in its A stage and B slot, and no slot may be refilled before its last
// reader let it go. The mbarrier model is PTX's: a phase completes when its pending arrivals and
// transaction bytes reach zero, and a parity wait passes once the phase of that parity is done.
// The unit geometry comes from kernels/ragdot/strips.h itself; the loops mirror the kernel's (an
// edit to the kernel's order of loads or releases belongs here too). The model is sharp at the
// kernel's bound: A run kAStages - 1 steps ahead of B, one more than the kernel allows, deadlocks
// in the first test.
#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ragdot/strips.h"

namespace {

struct Barrier {
  int count = 1, pending = 1, phase = 0;
  long long tx = 0;
  void arrive() {
    --pending;
    settle();
  }
  void settle() {
    if (pending == 0 && tx == 0) ++phase, pending = count;
  }
  // mbarrier.try_wait.parity: the phase of parity `p` has completed (a fresh barrier: parity 1)
  bool passed(int p) const { return (phase & 1) != p; }
};

// One step of an actor: `ready` says whether it can run now, `run` does it.
struct Op {
  std::function<bool()> ready;
  std::function<void()> run;
};

struct Cta {
  int a_stages, b_slots;
  std::vector<Barrier> full_a, empty_a, full_b, empty_b, ring_full, ring_empty;
  std::vector<long long> a_tag, b_tag;  // what each stage / slot holds (-1: nothing yet)
  std::vector<int> ring;
  int sync_arrived = 0, sync_generation = 0;
  struct Landing {
    Barrier* bar;
    long long* slot;
    long long tag;
  };
  std::deque<Landing> in_flight;  // TMA loads issued, not landed
  std::string failure;

  Cta(int a, int b) : a_stages(a), b_slots(b), full_a(a), empty_a(a), full_b(b), empty_b(b), ring_full(4),
                      ring_empty(4), a_tag(a, -1), b_tag(b, -1), ring(4, -2) {
    for (auto* v : {&empty_a, &empty_b})
      for (auto& bar : *v) bar.count = bar.pending = 2;  // one arrival per consumer warpgroup
    for (auto& bar : ring_empty) bar.count = bar.pending = 2;
  }
};

long long ll(std::size_t n) { return static_cast<long long>(n); }
long long tag_a(long long unit, int tile, int kt) { return (unit * 64 + tile) * 1024 + kt; }
long long tag_b(long long unit, int tile, int kt) { return ((unit * 64 + tile) * 1024 + kt) * 2 + 1; }

struct Unit {
  int k_steps, count;
  bool resident;
};

// The producer's operations, as Strips::produce issues them (its tile ring as next_tile's);
// `a_first`: every A tile of a tile before its B instead (an order the kernel must not use).
std::vector<Op> producer(Cta& c, const std::vector<Unit>& units, bool a_first = false) {
  std::vector<Op> ops;
  const int P = c.a_stages, R = c.b_slots;
  auto wait = [&ops](std::vector<Barrier>* v, int i, int parity) {
    ops.push_back({[v, i, parity] { return (*v)[std::size_t(i)].passed(parity); }, [] {}});
  };
  auto load = [&c, &ops](std::vector<Barrier>* full, std::vector<long long>* slots, int i, long long tag) {
    ops.push_back({[] { return true; }, [&c, full, slots, i, tag] {
                     Barrier& b = (*full)[std::size_t(i)];
                     b.tx += 1;  // arrive.expect_tx, then the copy
                     b.arrive();
                     c.in_flight.push_back({&b, &(*slots)[std::size_t(i)], tag});
                   }});
  };
  std::uint32_t ia = 0, ib = 0;
  for (std::size_t n = 0; n <= units.size(); ++n) {
    const int s = int(n % 4), ph = int((n / 4) & 1);
    wait(&c.ring_empty, s, ph ^ 1);
    const int value = n < units.size() ? int(n) : -1;
    ops.push_back({[] { return true; }, [&c, s, value] {
                     c.ring[std::size_t(s)] = value;
                     c.ring_full[std::size_t(s)].arrive();
                   }});
    if (n == units.size()) break;
    const Unit& w = units[n];
    for (int i = 0; i < w.count; ++i) {
      const bool with_b = i == 0 || !w.resident;
      const int lag = !with_b ? 0 : a_first ? w.k_steps : P - 2;
      for (int j = 0; j < w.k_steps + lag; ++j) {
        if (j < w.k_steps) {
          const std::uint32_t a = ia + std::uint32_t(j);
          wait(&c.empty_a, int(a % P), int((a / P) & 1) ^ 1);
          load(&c.full_a, &c.a_tag, int(a % P), tag_a(ll(n), i, j));
        }
        if (with_b && j >= lag) {
          const std::uint32_t b = ib + std::uint32_t(j - lag);
          wait(&c.empty_b, int(b % R), int((b / R) & 1) ^ 1);
          load(&c.full_b, &c.b_tag, int(b % R), tag_b(ll(n), w.resident ? 0 : i, j - lag));
        }
      }
      ia += std::uint32_t(w.k_steps);
      if (!w.resident) ib += std::uint32_t(w.k_steps);
    }
    if (w.resident) ib += std::uint32_t(w.k_steps);
  }
  return ops;
}

// One consumer warpgroup's operations, as Strips::consume and Kernel::k_protocol issue them
// (thread 0's arrivals; wgmma's reads at issue, checked again when the step is released).
// `partial`: whether a unit's last k step runs past its group (the tail is cleared, both
// warpgroups meeting at a named barrier).
// `b_back_each_tile`: a resident strip's B slots released after every tile, not after its last
// (a protocol the kernel must not use).
std::vector<Op> consumer(Cta& c, const std::vector<Unit>& units, const std::vector<bool>& partial,
                         bool b_back_each_tile = false) {
  std::vector<Op> ops;
  const int P = c.a_stages, R = c.b_slots;
  auto wait = [&ops](std::vector<Barrier>* v, int i, int parity) {
    ops.push_back({[v, i, parity] { return (*v)[std::size_t(i)].passed(parity); }, [] {}});
  };
  auto check = [&c, &ops](std::vector<long long>* slots, int i, long long tag, const char* what) {
    ops.push_back({[] { return true; }, [&c, slots, i, tag, what] {
                     if ((*slots)[std::size_t(i)] != tag && c.failure.empty())
                       c.failure = std::string(what) + " slot " + std::to_string(i) + " holds " +
                                   std::to_string((*slots)[std::size_t(i)]) + ", expected " + std::to_string(tag);
                   }});
  };
  auto arrive = [&ops](std::vector<Barrier>* v, int i) {
    ops.push_back({[] { return true; }, [v, i] { (*v)[std::size_t(i)].arrive(); }});
  };
  std::uint32_t ia = 0, ib = 0;
  for (std::size_t n = 0; n <= units.size(); ++n) {
    const int s = int(n % 4), ph = int((n / 4) & 1);
    wait(&c.ring_full, s, ph);
    const int expect = n < units.size() ? int(n) : -1;
    ops.push_back({[] { return true; }, [&c, s, expect] {
                     if (c.ring[std::size_t(s)] != expect && c.failure.empty())
                       c.failure = "tile ring slot " + std::to_string(s) + " holds " +
                                   std::to_string(c.ring[std::size_t(s)]) + ", expected " + std::to_string(expect);
                   }});
    arrive(&c.ring_empty, s);
    if (n == units.size()) break;
    const Unit& w = units[n];
    for (int i = 0; i < w.count; ++i) {
      auto release = [&](std::uint32_t a, int kt) {
        check(&c.a_tag, int(a % P), tag_a(ll(n), i, kt), "A (at release)");
        arrive(&c.empty_a, int(a % P));
        if (!w.resident) {
          const std::uint32_t b = ib + std::uint32_t(kt);
          check(&c.b_tag, int(b % R), tag_b(ll(n), i, kt), "B (at release)");
          arrive(&c.empty_b, int(b % R));
        }
      };
      for (int kt = 0; kt < w.k_steps; ++kt, ++ia) {
        const std::uint32_t b = ib + std::uint32_t(kt);
        wait(&c.full_a, int(ia % P), int((ia / P) & 1));
        wait(&c.full_b, int(b % R), int((b / R) & 1));
        if (partial[n] && kt == w.k_steps - 1) {  // consumers_sync: both warpgroups meet
          auto generation = std::make_shared<int>(-1);
          ops.push_back({[] { return true; }, [&c, generation] {
                           *generation = c.sync_generation;
                           if (++c.sync_arrived == 2) c.sync_arrived = 0, ++c.sync_generation;
                         }});
          ops.push_back({[&c, generation] { return c.sync_generation > *generation; }, [] {}});
        }
        check(&c.a_tag, int(ia % P), tag_a(ll(n), i, kt), "A");
        check(&c.b_tag, int(b % R), tag_b(ll(n), w.resident ? 0 : i, kt), "B");
        if (kt > 0) release(ia - 1, kt - 1);
      }
      if (w.k_steps > 0) release(ia - 1, w.k_steps - 1);
      if (!w.resident) {
        ib += std::uint32_t(w.k_steps);
      } else if (i == w.count - 1 || b_back_each_tile) {
        for (int kt = 0; kt < w.k_steps; ++kt) {
          const std::uint32_t b = ib + std::uint32_t(kt);
          check(&c.b_tag, int(b % R), tag_b(ll(n), 0, kt), "resident B (at release)");
          arrive(&c.empty_b, int(b % R));
        }
      }
    }
    if (w.resident) ib += std::uint32_t(w.k_steps);
  }
  return ops;
}

// Plays the CTA out with a random interleaving; returns "" or what went wrong.
std::string play(int a_stages, int b_slots, const std::vector<Unit>& units, const std::vector<bool>& partial,
                 std::uint64_t seed, bool a_first = false, bool b_back_each_tile = false) {
  Cta c(a_stages, b_slots);
  std::vector<std::vector<Op>> actors = {producer(c, units, a_first), consumer(c, units, partial, b_back_each_tile),
                                         consumer(c, units, partial, b_back_each_tile)};
  std::vector<std::size_t> at(actors.size(), 0);
  std::mt19937_64 rng(seed);
  for (;;) {
    std::vector<int> runnable;
    for (std::size_t a = 0; a < actors.size(); ++a)
      if (at[a] < actors[a].size() && actors[a][at[a]].ready()) runnable.push_back(int(a));
    const bool can_land = !c.in_flight.empty();
    if (runnable.empty() && !can_land) {
      for (std::size_t a = 0; a < actors.size(); ++a)
        if (at[a] < actors[a].size())
          return "deadlock: actor " + std::to_string(a) + " waits at operation " + std::to_string(at[a]) + " of " +
                 std::to_string(actors[a].size());
      return c.failure;
    }
    const std::size_t choice = rng() % (runnable.size() + (can_land ? 1 : 0));
    if (choice == runnable.size()) {  // the oldest load in flight lands (TMA completes in any order:
      // pick any, the order of landings is not the order of issue)
      const std::size_t k = rng() % c.in_flight.size();
      const Cta::Landing l = c.in_flight[k];
      c.in_flight.erase(c.in_flight.begin() + std::ptrdiff_t(k));
      *l.slot = l.tag;
      l.bar->tx -= 1;
      l.bar->settle();
    } else {
      const int a = runnable[choice];
      actors[std::size_t(a)][at[std::size_t(a)]++].run();
    }
    if (!c.failure.empty()) return c.failure;
  }
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
        const std::string result = play(a_stages, ragdot_strip_b_slots(bn), units, partial, rng());
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
  EXPECT_EQ(play(2, 4, streamed, whole, 1, /*a_first=*/true).rfind("deadlock", 0), 0u);
  // resident strips of 3 k steps and 3 tiles on 4 slots (each strip's B takes a slot of the one
  // before), 6 A stages: the producer runs a tile ahead
  const std::vector<Unit> strips(6, Unit{3, 3, true});
  const std::vector<bool> tails(6, false);
  int caught = 0;
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    EXPECT_EQ(play(6, 4, strips, tails, seed), "") << seed;
    caught += !play(6, 4, strips, tails, seed, false, /*b_back_each_tile=*/true).empty();
  }
  EXPECT_GT(caught, 5) << "releasing B after each tile went unnoticed";
}

}  // namespace
