// A host model of the Hopper kernels' synchronization, for tests that play a kernel's protocol out
// without a GPU: mbarriers with PTX's phase and parity rules, named barriers, TMA loads that land
// later in any order, and actors (threads, warps or warpgroups) as sequences of operations that
// a random scheduler interleaves. A run ends when every actor is done, or reports a deadlock
// (some actor waits and nothing can ever release it) or the first failed check.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace ragdot::barrier_model {

// mbarrier: a phase completes when its pending arrivals and transaction bytes reach zero.
struct Barrier {
  int count = 1, pending = 1, phase = 0;
  long long tx = 0;
  void init(int n) { count = pending = n; }
  void arrive() {
    --pending;
    settle();
  }
  void settle() {
    if (pending == 0 && tx == 0) ++phase, pending = count;
  }
  // mbarrier.try_wait.parity: the phase of parity `p` has completed (a fresh barrier: parity 1).
  // Two phases on, it cannot tell: that is the hardware's rule too.
  bool passed(int p) const { return (phase & 1) != p; }
};

// bar.sync with `count` participants: each arrives, then waits for its generation to close.
struct NamedBarrier {
  int count = 2, arrived = 0, generation = 0;
};

// One step of an actor: `ready` says whether it can run now, `run` does it.
struct Op {
  std::function<bool()> ready;
  std::function<void()> run;
};

// The kernels' tile ring (wgmma.cuh's TileRing): four slots the producer fills in turn with the
// units it takes from the tile counter (-1 at the end), each freed once `readers` warps read it.
struct TileRing {
  Barrier full[4], empty[4];
  long long value[4] = {-2, -2, -2, -2};
  explicit TileRing(int readers) {
    for (auto& b : empty) b.init(readers);
  }
};

// A TMA load in flight: lands `tag` in `slot` and completes one transaction unit on `bar`.
struct Landing {
  Barrier* bar;
  long long* slot;
  long long tag;
};

struct World {
  std::deque<Landing> in_flight;
  std::string failure;  // the first failed check

  void fail(const std::string& what) {
    if (failure.empty()) failure = what;
  }
};

// Appends operations to one actor's program.
struct Program {
  World* world;
  std::vector<Op> ops;

  void wait(Barrier* bar, int parity) {
    ops.push_back({[bar, parity] { return bar->passed(parity); }, [] {}});
  }
  void arrive(Barrier* bar) {
    ops.push_back({[] { return true; }, [bar] { bar->arrive(); }});
  }
  // arrive.expect_tx, then a TMA load of `tag` into `slot` completing on `bar`
  void load(Barrier* bar, long long* slot, long long tag) {
    World* w = world;
    ops.push_back({[] { return true; }, [w, bar, slot, tag] {
                     bar->tx += 1;
                     bar->arrive();
                     w->in_flight.push_back({bar, slot, tag});
                   }});
  }
  void check(const long long* slot, long long expected, std::string what) {
    World* w = world;
    ops.push_back({[] { return true; }, [w, slot, expected, what] {
                     if (*slot != expected)
                       w->fail(what + ": holds " + std::to_string(*slot) + ", expected " + std::to_string(expected));
                   }});
  }
  // bar.sync; `at_close` runs once, when the last participant arrives (a collective operation of
  // the participants, such as wgmma's reads of shared memory for a whole warpgroup)
  void sync(NamedBarrier* b, std::function<void()> at_close = {}) {
    auto generation = std::make_shared<int>(-1);
    ops.push_back({[] { return true; }, [b, generation, at_close] {
                     *generation = b->generation;
                     if (++b->arrived == b->count) {
                       b->arrived = 0, ++b->generation;
                       if (at_close) at_close();
                     }
                   }});
    ops.push_back({[b, generation] { return b->generation > *generation; }, [] {}});
  }
  void run(std::function<void()> f) { ops.push_back({[] { return true; }, std::move(f)}); }
  // the producer's n-th unit (or -1) into the tile ring, as next_tile does
  void ring_put(TileRing* r, std::size_t n, long long unit) {
    const std::size_t s = n % 4;
    wait(&r->empty[s], int((n / 4) & 1) ^ 1);
    run([r, s, unit] {
      r->value[s] = unit;
      r->full[s].arrive();
    });
  }
  // a consumer warp's n-th unit from the tile ring, as take_tile does: it must be `unit`
  void ring_take(TileRing* r, std::size_t n, long long unit) {
    const std::size_t s = n % 4;
    wait(&r->full[s], int((n / 4) & 1));
    check(&r->value[s], unit, "tile ring slot " + std::to_string(s));
    arrive(&r->empty[s]);
  }
};

// Speeds for `actors` programs: all 1, but actor `slow` (none if negative) at a tenth of that.
inline std::vector<double> one_slow(std::size_t actors, int slow) {
  std::vector<double> speeds(actors, 1.0);
  if (slow >= 0 && std::size_t(slow) < actors) speeds[std::size_t(slow)] = 0.1;
  return speeds;
}

// Interleaves the programs at random (loads land at random points, in any order). Returns "" when
// every program finished, else the deadlock or the first failed check. `speeds` (optional, one
// per program) weights how often each runnable program takes the next step (a landing weighs 1):
// a slow warp falls far behind its warpgroup, as one busy with a long epilogue does.
inline std::string play(World& world, std::vector<Program>& programs, std::uint64_t seed,
                        const std::vector<double>& speeds = {}) {
  std::vector<std::size_t> at(programs.size(), 0);
  std::mt19937_64 rng(seed);
  for (;;) {
    if (!world.failure.empty()) return world.failure;
    std::vector<std::size_t> runnable;
    for (std::size_t a = 0; a < programs.size(); ++a)
      if (at[a] < programs[a].ops.size() && programs[a].ops[at[a]].ready()) runnable.push_back(a);
    const bool can_land = !world.in_flight.empty();
    if (runnable.empty() && !can_land) {
      for (std::size_t a = 0; a < programs.size(); ++a)
        if (at[a] < programs[a].ops.size())
          return "deadlock: actor " + std::to_string(a) + " waits at operation " + std::to_string(at[a]) + " of " +
                 std::to_string(programs[a].ops.size());
      return "";
    }
    std::size_t choice = rng() % (runnable.size() + (can_land ? 1 : 0));
    if (!speeds.empty()) {
      std::vector<double> w;
      for (std::size_t a : runnable) w.push_back(speeds[a]);
      if (can_land) w.push_back(1.0);
      choice = std::discrete_distribution<std::size_t>(w.begin(), w.end())(rng);
    }
    if (choice == runnable.size()) {
      const std::size_t k = rng() % world.in_flight.size();
      const Landing l = world.in_flight[k];
      world.in_flight.erase(world.in_flight.begin() + std::ptrdiff_t(k));
      *l.slot = l.tag;
      l.bar->tx -= 1;
      l.bar->settle();
    } else {
      const std::size_t a = runnable[choice];
      programs[a].ops[at[a]++].run();
    }
  }
}

}  // namespace ragdot::barrier_model
