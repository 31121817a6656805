// The tile ring of a CTA cluster (kernels/ragdot/wgmma.cuh: next_tile, take_tile, relay_tile_slot,
// produce and produce_gathered_pair), played out on the host (barrier_model.hpp).
// Every CTA has a ring of four slots with a full and an empty mbarrier each. Rank 0's producer
// thread takes the units and writes each into its own slot and, by remote stores, into every
// peer's; each CTA's readers (the threads of its eight consumer warps, in a gathered pair of its
// four producer warps too, on ranks past 0 otherwise its producer thread) read their own CTA's
// slot and each arrives on their own CTA's empty barrier. The model plays a warp as one reader:
// its read and arrival stand for those of its 32 threads, which the barrier counts one by one.
// Those arrivals are CTA-local, so rank 0 cannot wait on a peer's readers directly: each peer's
// producer thread, at its iteration n (a gathered pair's before it takes tile n, produce's after),
// waits until its own readers have all read tile n - 3 and then arrives on rank 0's empty barrier
// of that slot (the relay), and rank 0's empty barriers count its own readers plus one relay per
// peer.
// Two things can go wrong. Rank 0 may overwrite a peer's slot before the peer's readers read it:
// they would take a different unit than the rest of the cluster. Or rank 0's writes and the relays
// may wait in a circle, through the stage ring that ties the CTAs together: a tile's consumers
// need its k steps loaded, and every CTA's consumer warpgroups release every CTA's stages, so no
// producer runs more than a ring of stages ahead of the slowest consumer in the cluster. The model
// plays all of it: per CTA the producer thread (ring and stage loads), the readers, and the eight
// consumer warps with their k steps, interleaved at random with one actor slow. Each read must
// find its unit, every write must find all readers of the slot's last round done, and every run
// must finish. The relay's lag has a window. Before the take, 1 to 4 tiles back work (at 4, rank
// 0 writes tile m only once every peer's producer has loaded all of tile m - 1, which needs
// nothing of tile m); 0 waits for the producer thread's own read of the tile it has not taken
// yet, and 5 waits for tile m - 1 to be taken, which rank 0 writes only after that relay (m = 4
// onwards). After the take the window is 0 to 3: at 4 the relay of tile m - 4 waits for tile m to
// be taken, which rank 0 writes only after it. The kernel's 3 is the largest lag after the take.
// What the model leaves out: the memory model (a relay at the wrong scope would pass here;
// racecheck on the GPU is the check for that), and a gathered pair's gathering warps' waits on
// the stage ring (they appear only as ring readers).
// A relay that does not wait for its readers is caught too.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "barrier_model.hpp"

namespace {

using namespace ragdot::barrier_model;  // Barrier, NamedBarrier, Program, TileRing, World, play

constexpr int kSlots = 4;  // wgmma.cuh's kTileSlots

struct Config {
  int cluster;  // CTAs: 2 or 4
  bool pair;    // a gathered pair (two CTAs): the four producer warps read the ring too
  int stages;
};

// The relay of ranks past 0: `lag` tiles back (the kernel: kTileSlots - 1), after waiting for
// this CTA's readers of that tile (`wait_readers`), before taking the tile (a gathered pair's
// thread 0) or after it (`after_take`: produce's thread, also once it has taken the end). Other
// lags and no wait are deliberate mistakes.
struct Relay {
  int lag = kSlots - 1;
  bool wait_readers = true;
  bool after_take = false;
};

// One CTA: its tile ring, how many reads of each slot's current round its readers have made, and
// its stage ring (full and empty barriers, what each stage holds, each warpgroup's wgmma issue).
struct Cta {
  TileRing ring;
  int readers;
  int reads[kSlots] = {};
  std::vector<Barrier> full, empty;
  std::vector<long long> stage_tag;
  NamedBarrier wgmma[2];

  Cta(const Config& cfg, int rank)
      : ring(local_readers(cfg, rank) + (rank == 0 ? cfg.cluster - 1 : 0)),  // + one relay per peer
        readers(local_readers(cfg, rank)),
        full(std::size_t(cfg.stages)),
        empty(std::size_t(cfg.stages)),
        stage_tag(std::size_t(cfg.stages), -1) {
    for (auto& b : empty) b.init(2 * cfg.cluster);  // one arrival per consumer warpgroup of the cluster
    wgmma[0].count = wgmma[1].count = 4;
  }
  // kTileReaders (one reader per warp here), plus the producer thread of a rank past 0 outside a
  // gathered pair
  static int local_readers(const Config& cfg, int rank) { return cfg.pair ? 12 : 8 + (rank > 0 ? 1 : 0); }
};

struct Cluster {
  Config cfg;
  std::vector<int> k_steps;  // per unit
  std::deque<Cta> ctas;      // (a deque: the programs keep pointers into it)

  long long unit(std::size_t n) const { return n < k_steps.size() ? static_cast<long long>(n) : -1; }
};

long long tag(std::size_t unit, int kt) { return static_cast<long long>(unit) * 1024 + kt; }

// next_tile's store into one CTA's slot: first, every reader of the slot's last round has read it.
void write_slot(Program& p, Cta& c, int rank, std::size_t n, long long unit) {
  World* w = p.world;
  const std::size_t s = n % kSlots;
  p.run([w, &c, rank, n, s, unit] {
    const int want = n < kSlots ? 0 : c.readers;
    if (c.reads[s] != want)
      w->fail("slot " + std::to_string(s) + " of rank " + std::to_string(rank) + " rewritten for unit " +
              std::to_string(n) + " after " + std::to_string(c.reads[s]) + " of " + std::to_string(want) + " reads");
    c.reads[s] = 0;
    c.ring.value[s] = unit;
    c.ring.full[s].arrive();
  });
}

// take_tile (by a warp, standing for its threads, or a rank's producer thread): wait, read (it must be `unit`), arrive on this CTA's empty.
void take(Program& p, Cta& c, std::size_t n, long long unit) {
  World* w = p.world;
  const std::size_t s = n % kSlots;
  p.wait(&c.ring.full[s], int((n / kSlots) & 1));
  p.run([w, &c, s, n, unit] {
    if (c.ring.value[s] != unit)
      w->fail("read of unit " + std::to_string(n) + " found " + std::to_string(c.ring.value[s]));
    ++c.reads[s];
  });
  p.arrive(&c.ring.empty[s]);
}

// The producer thread of `rank`, as produce (or a gathered pair's thread 0) issues its operations:
// rank 0 writes every CTA's slot, the others relay, then take the unit and load its k steps.
Program producer(World& world, Cluster& k, int rank, Relay relay) {
  Program p{&world, {}};
  Cta& c = k.ctas[std::size_t(rank)];
  const std::uint32_t S = std::uint32_t(k.cfg.stages);
  std::uint32_t it = 0;
  for (std::size_t n = 0;; ++n) {
    const long long unit = k.unit(n);
    if (rank == 0) {
      p.wait(&c.ring.empty[n % kSlots], int((n / kSlots) & 1) ^ 1);
      for (int r = 0; r < k.cfg.cluster; ++r) write_slot(p, k.ctas[std::size_t(r)], r, n, unit);
    }
    const auto relay_now = [&] {
      if (rank == 0 || int(n) < relay.lag) return;
      const std::size_t d = n - std::size_t(relay.lag), s = d % kSlots;
      if (relay.wait_readers) p.wait(&c.ring.empty[s], int((d / kSlots) & 1));
      p.arrive(&k.ctas[0].ring.empty[s]);
    };
    if (!relay.after_take) relay_now();
    if (rank != 0 || k.cfg.pair) take(p, c, n, unit);  // rank 0's thread 0 reads as warp 0 of a pair
    if (relay.after_take) relay_now();
    if (unit < 0) break;
    for (int kt = 0; kt < k.k_steps[n]; ++kt, ++it) {
      p.wait(&c.empty[it % S], int((it / S) & 1) ^ 1);
      p.load(&c.full[it % S], &c.stage_tag[it % S], tag(n, kt));
    }
  }
  return p;
}

// A gathered pair's producer warps 1 to 3: here only their reads of the ring.
Program ring_reader(World& world, Cluster& k, int rank) {
  Program p{&world, {}};
  for (std::size_t n = 0;; ++n) {
    take(p, k.ctas[std::size_t(rank)], n, k.unit(n));
    if (k.unit(n) < 0) break;
  }
  return p;
}

// Warp `warp` of consumer warpgroup `wg` of `rank`, as consume and k_loop issue its operations:
// take the unit, then its k steps (wgmma as a meeting of the warpgroup's four warps, its read of
// the stage checked when the last one issues); warp 0 releases each step once the next is issued
// and the last at the unit's end, on every CTA's empty barrier (release_stage).
Program consumer(World& world, Cluster& k, int rank, int wg, int warp) {
  Program p{&world, {}};
  Cta& c = k.ctas[std::size_t(rank)];
  const std::uint32_t S = std::uint32_t(k.cfg.stages);
  World* w = &world;
  std::uint32_t it = 0;
  auto release = [&](std::uint32_t step, std::size_t n, int kt) {
    if (warp != 0) return;
    p.check(&c.stage_tag[step % S], tag(n, kt), "stage at its release");
    for (int peer = 0; peer < k.cfg.cluster; ++peer)
      p.arrive(&k.ctas[std::size_t(rank ^ peer)].empty[step % S]);
  };
  for (std::size_t n = 0;; ++n) {
    take(p, c, n, k.unit(n));
    if (k.unit(n) < 0) break;
    for (int kt = 0; kt < k.k_steps[n]; ++kt, ++it) {
      p.wait(&c.full[it % S], int((it / S) & 1));
      const long long* stage = &c.stage_tag[it % S];
      const long long want = tag(n, kt);
      p.sync(&c.wgmma[wg], [w, stage, want] {
        if (*stage != want) w->fail("stage at wgmma holds " + std::to_string(*stage) + ", expected " + std::to_string(want));
      });
      if (kt > 0) release(it - 1, n, kt - 1);
    }
    if (k.k_steps[n] > 0) release(it - 1, n, k.k_steps[n] - 1);
    // the epilogue: no barrier
  }
  return p;
}

// `slow`: the actor that runs at a tenth of the others' pace (by index, none if out of range).
std::string play(const Config& cfg, const std::vector<int>& k_steps, std::uint64_t seed, int slow, Relay relay = {}) {
  World world;
  Cluster k{cfg, k_steps, {}};
  for (int r = 0; r < cfg.cluster; ++r) k.ctas.emplace_back(cfg, r);
  std::vector<Program> programs;
  for (int r = 0; r < cfg.cluster; ++r) {
    programs.push_back(producer(world, k, r, relay));
    if (cfg.pair)
      for (int warp = 1; warp < 4; ++warp) programs.push_back(ring_reader(world, k, r));
    for (int wg = 0; wg < 2; ++wg)
      for (int warp = 0; warp < 4; ++warp) programs.push_back(consumer(world, k, r, wg, warp));
  }
  return ragdot::barrier_model::play(world, programs, seed, one_slow(programs.size(), slow));
}

struct Case {
  std::size_t units;
  std::string result;
};

// Plays `per_config` random cases for each form (pairs along any dimension of 2 and 4 CTAs, a
// gathered pair) and 2 to 4 stages: 0 to 40 units of 0 to 3 k steps (0: a zero tile), one actor
// slow in most runs.
std::vector<Case> play_cases(Relay relay, int per_config) {
  std::mt19937_64 rng(7);
  std::vector<Case> cases;
  for (const Config& form : {Config{2, false, 0}, Config{4, false, 0}, Config{2, true, 0}}) {
    for (int stages : {2, 3, 4}) {
      const Config cfg{form.cluster, form.pair, stages};
      for (int trial = 0; trial < per_config; ++trial) {
        std::vector<int> k_steps(rng() % 41);
        for (int& s : k_steps) s = int(rng() % 4);
        const int actors = cfg.cluster * (cfg.pair ? 12 : 9);
        const int slow = int(rng() % std::uint64_t(actors + 4)) - 1;  // some runs none slow
        cases.push_back({k_steps.size(), play(cfg, k_steps, rng(), slow, relay)});
      }
    }
  }
  return cases;
}

// The relay before the take (the kernel's gathered pair) and after it (its other clusters), both
// played on every form.
TEST(TileRingProtocol, EveryInterleavingFinishesAndReadsTheUnitWritten) {
  for (const bool after_take : {false, true}) {
    Relay relay;
    relay.after_take = after_take;
    const std::vector<Case> cases = play_cases(relay, 40);
    ASSERT_EQ(cases.size(), 9u * 40);
    for (std::size_t i = 0; i < cases.size(); ++i)
      ASSERT_EQ(cases[i].result, "") << "case " << i << (after_take ? ", relay after the take" : "");
  }
}

// The model can fail: a relay that does not wait for its CTA's readers lets rank 0 overwrite a
// slot a slow reader has not read yet (a wrong unit read, a write before the last round's reads,
// or a reader left waiting on a full barrier two phases on); a relay five tiles back waits for a
// tile rank 0 writes only after it (every run with 4 units or more hangs), and so does a relay
// four back after the take; none back before the take waits for the producer's own read. One,
// two and four tiles back before the take, and none to two after it, work as the kernel's three.
TEST(TileRingProtocol, TheModelCatchesAWrongRelay) {
  Relay no_wait;
  no_wait.wait_readers = false;
  int caught = 0, misreads = 0;
  for (const Case& c : play_cases(no_wait, 30)) {
    caught += !c.result.empty();
    misreads += c.result.rfind("deadlock", 0) != 0 && !c.result.empty();
  }
  EXPECT_GE(caught, 30) << "a relay that does not wait for the readers went unnoticed";
  EXPECT_GE(misreads, 20) << "hardly any wrong read or early write caught";
  std::fprintf(stderr, "  relay without waiting: %d of 270 runs caught, %d by a wrong read or early write\n", caught,
               misreads);

  struct Late {
    int lag;
    bool after_take;
  };
  for (const Late late : {Late{0, false}, Late{5, false}, Late{4, true}}) {
    int hangs = 0, expected = 0;
    for (const Case& c : play_cases(Relay{late.lag, true, late.after_take}, 30)) {
      EXPECT_TRUE(c.result.empty() || c.result.rfind("deadlock", 0) == 0) << c.result;  // a hang, never a wrong read
      const bool must_hang = late.lag == 0 || c.units >= kSlots;
      expected += must_hang;
      hangs += !c.result.empty();
      EXPECT_EQ(c.result.empty(), !must_hang) << "lag " << late.lag << (late.after_take ? " after the take" : "")
                                              << ", " << c.units << " units: " << c.result;
    }
    std::fprintf(stderr, "  relay %d tiles back%s: %d of 270 runs hang (%d expected)\n", late.lag,
                 late.after_take ? " after the take" : "", hangs, expected);
  }
  for (int lag : {1, 2, 4})
    for (const Case& c : play_cases(Relay{lag, true, false}, 10)) EXPECT_EQ(c.result, "") << "lag " << lag;
  for (int lag : {0, 1, 2})
    for (const Case& c : play_cases(Relay{lag, true, true}, 10)) EXPECT_EQ(c.result, "") << "lag " << lag << " after the take";
}

}  // namespace
