// The cuda backend on a GPU, against the oracle: every mode x dtype x layout, group sizes with
// zeros, odd sizes, all-in-one, sum < extent, group offsets, batch dims; outputs poisoned first.
// Also: graph capture replayed with different group sizes, checked mode, clamping of bad sizes.
// Label "gpu": skipped (not failed) where there is no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <regex>
#include <string>

#include "backends/cuda/cuda_driver.hpp"
#include "backends/cuda/device.hpp"
#include "gpu_test_support.hpp"
#include "scoped_env.hpp"
#include "ragdot/split.h"
#include "verify/check.hpp"

namespace ragdot {
namespace {

using verify::GroupPattern;

using gpu_test::gpu;
using gpu_test::kPatterns;
using gpu_test::weights_nk;

// Checks one case on the cuda backend (running it `repeats` times: bitwise the same each time);
// returns the plan's description.
std::string expect_cuda_pass(const verify::Case& c, std::uint64_t seed, bool allow_unsupported = false,
                             int repeats = 1) {
  PlanOptions po;
  po.backend = "cuda";
  const auto t0 = std::chrono::steady_clock::now();
  auto r = verify::check_case(c, po, seed, *gpu(), repeats);
  // progress on stderr: a hang or a slow case shows where it happened
  std::fprintf(stderr, "  [%s %.2fs] %s | %s\n", r.passed ? "ok" : "FAIL",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), c.description.c_str(),
               r.plan.c_str());
  if (!(allow_unsupported && r.message.rfind("unsupported", 0) == 0))
    EXPECT_TRUE(r.passed) << c.description << "\n  " << r.plan << "\n  " << r.message;
  return r.plan;
}

struct Shape {
  std::int64_t m, k, n, g;
};

// Mode 1 on `sh` with weights [g, k, n], or [g, n, k] with `nk`.
verify::Case mode1_case(const Shape& sh, const std::vector<std::int64_t>& gs, DType dt, DType out, bool nk) {
  if (nk) return weights_nk(sh.m, sh.k, sh.n, gs, dt, out);
  auto made = verify::shaped_case(1, sh.m, sh.k, sh.n, gs, dt, out);
  EXPECT_TRUE(made.ok()) << made.status().message();
  return made.ok() ? *made : verify::Case{};
}

// verify::shaped_case, failing the test (and giving an empty case) if it cannot be made.
verify::Case shaped(int mode, std::int64_t m, std::int64_t k, std::int64_t n, std::vector<std::int64_t> gs, DType dt,
                    DType out) {
  auto c = verify::shaped_case(mode, m, k, n, gs, dt, out);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : verify::Case{};
}

// Mode 1 with a group offset: groups [2, 4) of 5; rhs holds the 2 local groups.
verify::Case mode1_offset_case() {
  verify::Case c;
  c.spec.lhs = {DType::kBF16, {900, 128}};
  c.spec.rhs = {DType::kBF16, {2, 128, 256}};
  c.spec.group_sizes = {DType::kI32, {5}};
  c.spec.dims = RaggedDotDimensionNumbers::ragged_dot();
  c.spec.group_offset = GroupOffset{2};
  c.group_sizes = {100, 150, 300, 200, 150};
  c.group_offset = 2;
  c.description = "mode1 group offset 2 of 5, 2 local";
  return c;
}

// Mode 2 with a group offset: groups [1, 3) of 4; the output holds the 2 local groups.
verify::Case mode2_offset_case() {
  auto made = verify::shaped_case(2, 192, 700, 256, {100, 237, 301, 50}, DType::kBF16);
  EXPECT_TRUE(made.ok()) << made.status().message();
  if (!made.ok()) return verify::Case{};
  verify::Case c = *made;
  c.spec.group_offset = GroupOffset{2};  // 2 local groups
  c.group_offset = 1;
  c.description = "mode2 group offset 1 of 4, 2 local";
  return c;
}

TEST(CudaBackend, ShapedCasesEveryModeDtypeLayout) {
  REQUIRE_GPU();
  // Small enough that the float64 oracle keeps the whole matrix to about a minute; odd sizes
  // cover partial tiles on every edge, 33 groups put several group boundaries inside one tile.
  const Shape shapes[] = {{300, 128, 136, 8}, {77, 64, 40, 5}, {213, 72, 264, 33}, {256, 320, 64, 1}};
  workloads::SplitMix64 rng(3);
  std::uint64_t seed = 1;
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (DType out : {dt, DType::kF32}) {
      for (const Shape& sh : shapes) {
        for (GroupPattern pat : kPatterns) {
          for (int mode = 1; mode <= 3; ++mode) {
            // mode 3: the group sizes split a small batch (shaped_case sizes the batch from them)
            const std::int64_t extent = mode == 1 ? sh.m : mode == 2 ? sh.k : 4;
            const std::int64_t groups = mode == 3 ? 3 : sh.g;
            auto gs = verify::make_group_sizes(pat, groups, extent, rng);
            auto c = verify::shaped_case(mode, sh.m, sh.k, sh.n, gs, dt, out);
            ASSERT_TRUE(c.ok()) << c.status().message();
            c->description += std::string(" ") + verify::group_pattern_name(pat);
            expect_cuda_pass(*c, seed++);
          }
          auto nk = weights_nk(sh.m, sh.k, sh.n, verify::make_group_sizes(pat, sh.g, sh.m, rng), dt, out);
          expect_cuda_pass(nk, seed++);
        }
      }
    }
  }
}

bool device_is_hopper() {
  auto dev = cuda::device(0);
  return dev.ok() && (*dev)->traits.cc_major == 9 && (*dev)->traits.cc_minor == 0;
}

// Sets RAGDOT_CUDA_VARIANT (read when a plan is made) for the guard's lifetime; "" leaves it as it is.
class ScopedVariant {
 public:
  explicit ScopedVariant(const std::string& spec) {
    if (!spec.empty()) env_.emplace("RAGDOT_CUDA_VARIANT", spec);
  }

 private:
  std::optional<ragdot::testing::ScopedEnv> env_;
};

// One small case per kernel family and operand layout the planner can choose (on Hopper: wgmma
// for mode 1 with both weight layouts, for decode-sized groups and for mode 2; mma.sync for
// mode 3; SIMT for f32; a relayout copy for an operand no family reads in place; wgmma reading
// gathered rows), each run three
// times on a poisoned output: every run must match the oracle and give the first run's bytes.
// Small on purpose: scripts/gpu_check.sh runs this test under compute-sanitizer's memcheck,
// racecheck and synccheck.
struct Family {
  const char* expect;  // substring of the plan on Hopper
  verify::Case c;
};
std::vector<Family> family_cases(bool hopper) {
  const std::vector<std::int64_t> gs4 = {130, 0, 61, 209};  // an empty group, a partial tile, a group end mid-tile
  std::vector<Family> cases;
  cases.push_back({"wgmma", shaped(1, 400, 128, 264, gs4, DType::kBF16, DType::kBF16)});
  cases.push_back({"wgmma", gpu_test::weights_nk(400, 128, 264, gs4, DType::kF16, DType::kF32)});
  cases.push_back({"wgmma", shaped(2, 136, 400, 128, gs4, DType::kBF16, DType::kF32)});
  // decode-sized groups: on Hopper the wgmma family with one idle warpgroup (TMA streams the weights)
  cases.push_back({"wgmma", shaped(1, 24, 256, 136, {5, 0, 11, 8}, DType::kBF16, DType::kBF16)});
  cases.push_back({"mma_sync", shaped(3, 64, 72, 40, {2, 1, 1}, DType::kBF16, DType::kF32)});
  cases.push_back({"simt", shaped(1, 150, 40, 36, {50, 0, 70, 30}, DType::kF32, DType::kF32)});
  if (hopper) {  // gathered A rows (cp.async loads): repeated, out of order, some outside the table
    verify::Case c = shaped(1, 400, 128, 264, gs4, DType::kBF16, DType::kBF16);
    c.lhs_table_rows = 150;
    for (int i = 0; i < 400; ++i) c.lhs_rows.push_back(i % 7 == 3 ? -1 : (i * 37) % 151);  // 150: past the table
    c.description += " rows gathered from 150";
    cases.push_back({"gatherA", c});
  }
  {
    // two contracting dims in opposite orders in lhs [m, 4, 16] and rhs [g, 16, 4, n]: no single
    // k stride serves both, so one operand is copied into the workspace first
    verify::Case c;
    c.spec.lhs = {DType::kBF16, {200, 4, 16}};
    c.spec.rhs = {DType::kBF16, {2, 16, 4, 40}};
    c.spec.group_sizes = {DType::kI32, {2}};
    c.spec.dims.dot = {{1, 2}, {2, 1}, {}, {}};
    c.spec.dims.lhs_ragged = {0};
    c.spec.dims.rhs_group = {0};
    c.group_sizes = {90, 110};
    c.description = "mode1 contracting dims transposed between lhs and rhs";
    cases.push_back({"copy", c});
  }
  return cases;
}

TEST(CudaBackend, EveryFamilyMatchesTheOracleAndRepeatsBitwise) {
  REQUIRE_GPU();
  const bool hopper = device_is_hopper();
  std::uint64_t seed = 9000;
  for (const auto& f : family_cases(hopper)) {
    const std::string plan = expect_cuda_pass(f.c, seed++, false, /*repeats=*/3);
    if (hopper) EXPECT_NE(plan.find(f.expect), std::string::npos) << f.c.description << ": " << plan;
  }
}


// Every family with a group's m tiles taken in blocks (kernels/ragdot/raster.h) of one tile and of
// a few (RAGDOT_CUDA_VARIANT=raster=KiB, a budget far below these groups' rows), and groups of
// many m tiles in both modes: the tile order changes, the results must not.
TEST(CudaBackend, EveryFamilyInTileBlocksMatchesTheOracle) {
  REQUIRE_GPU();
  const bool hopper = device_is_hopper();
  std::uint64_t seed = 9500;
  std::vector<verify::Case> cases;
  for (const auto& f : family_cases(hopper)) cases.push_back(f.c);
  // groups of 7 m tiles (blocks of 3, 3, 1 at raster=100) and mode 2 with 8 m tiles per group
  cases.push_back(shaped(1, 1100, 128, 264, {830, 0, 270}, DType::kBF16, DType::kBF16));
  cases.push_back(gpu_test::weights_nk(1100, 128, 264, {270, 830}, DType::kF16, DType::kF32));
  cases.push_back(shaped(2, 900, 300, 264, {100, 0, 77, 123}, DType::kBF16, DType::kF32));
  for (const char* spec : {"raster=1", "raster=100"}) {
    ScopedVariant blocks(spec);
    for (verify::Case c : cases) {
      c.description += std::string(" ") + spec;
      // the plan says so (a plan in blocks runs the same kernel: only its description tells it
      // apart), unless it runs strips, which have an order of their own
      const std::string plan = expect_cuda_pass(c, seed++);
      if (plan.find(" strips") == std::string::npos)
        EXPECT_NE(plan.find(std::string(" ") + spec + " grid="), std::string::npos) << plan;
    }
  }
}

// The TMA + wgmma family on the shapes it is chosen for (about 100 rows or more per group), both
// weight layouts, every output dtype, every group pattern, and a group offset. On Hopper the plan
// must really be that family: a silent fall-back would leave it untested.
TEST(CudaBackend, HopperFamilyLayoutsPatternsAndOffset) {
  REQUIRE_GPU();
  const bool hopper = device_is_hopper();
  const Shape shapes[] = {{1000, 192, 320, 4}, {777, 136, 264, 3}, {600, 64, 520, 2}};
  workloads::SplitMix64 rng(17);
  std::uint64_t seed = 5000;
  int wgmma_plans = 0;
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (DType out : {dt, DType::kF32}) {
      for (const Shape& sh : shapes) {
        for (GroupPattern pat : kPatterns) {
          for (bool nk : {false, true}) {
            verify::Case c = mode1_case(sh, verify::make_group_sizes(pat, sh.g, sh.m, rng), dt, out, nk);
            c.description += std::string(" ") + verify::group_pattern_name(pat);
            wgmma_plans += expect_cuda_pass(c, seed++).find("wgmma") != std::string::npos;
          }
        }
      }
    }
  }
  expect_cuda_pass(mode1_offset_case(), seed++);
  if (hopper) EXPECT_GT(wgmma_plans, 100) << "the Hopper family was not planned for its shapes";
}

// Makes c's `rows` lhs rows come from a table of `table_rows` rows: mostly rows of the table,
// repeated and out of order, 1 in 32 index -1 and 1 in 32 just past the table (both read zeros).
void gather_from_table(verify::Case& c, std::int64_t rows, std::int64_t table_rows, workloads::SplitMix64& rng) {
  c.lhs_table_rows = table_rows;
  for (std::int64_t i = 0; i < rows; ++i) {
    const std::uint64_t pick = rng.next() % 32;
    c.lhs_rows.push_back(pick == 0   ? -1
                         : pick == 1 ? std::int32_t(table_rows)
                                     : std::int32_t(rng.next() % std::uint64_t(table_rows)));
  }
}

// Gathered lhs rows (PlanOptions::lhs_gather_rows): the Hopper family's cp.async A loads, with
// rows repeated, out of order and outside the table (zeros), every group pattern, both weight
// layouts, 16-bit and f32 outputs, and a table shorter and longer than the rows; three runs each,
// bitwise the same. Under `spec`: the planner's choice ("": CTA pairs along n, each CTA gathering
// half of the rows and sending it to the other, where n has an even number of 256-column tiles and
// the outputs are 16-bit; one CTA per tile otherwise), one CTA per tile everywhere ("cluster=1"),
// or pairs everywhere ("cluster=2n", 16-bit outputs only: a pair with an odd number of column
// tiles has a CTA without columns in every row block's last pair, and n = 200 pairs 128-wide
// tiles, rank 1 taking the last 72 columns; the planner makes neither, the override can). The shapes
// give pair tiles with columns for both CTAs, n = 8 past a pair tile (the last pair's rank 1 has
// 8 columns), an odd number of tiles, n within one tile, groups of 40 rows (the upper half of
// most tiles is rows past the group), and k = 1000 (16 k steps a tile: the ring wraps within a
// tile); then the SwiGLU epilogue on gathered rows. `small`: four shapes and two patterns (for
// compute-sanitizer). Elsewhere the cuda backend must say it does not gather.
void check_gathered_rows(const char* spec, bool small) {
  ScopedVariant variant(spec);
  const bool hopper = device_is_hopper();
  const std::vector<Shape> shapes =
      small ? std::vector<Shape>{{300, 128, 520, 3}, {200, 64, 200, 2}, {240, 72, 776, 3}, {160, 64, 512, 2}}
            : std::vector<Shape>{{1000, 192, 320, 4}, {777, 136, 264, 3}, {600, 64, 776, 3}, {300, 128, 520, 8},
                                 {240, 72, 1000, 6}, {200, 64, 200, 2}, {300, 1000, 264, 3}};
  const std::vector<GroupPattern> patterns =
      small ? std::vector<GroupPattern>{GroupPattern::kRandom, GroupPattern::kPartialSum}
            : std::vector<GroupPattern>(std::begin(kPatterns), std::end(kPatterns));
  const bool one_cta = std::string(spec) == "cluster=1", forced_pairs = std::string(spec) == "cluster=2n";
  // the planner's rule, kernel_variant.cpp's column_tiles_pair_up
  const auto planner_pairs = [](std::int64_t n) { return n > 256 && ((n + 255) / 256) % 2 == 0; };
  workloads::SplitMix64 rng(41);
  std::uint64_t seed = one_cta ? 9600 : forced_pairs ? 9300 : 9000;
  int cases = 0, gathered_plans = 0, expected_pairs = 0, pair_plans = 0;
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (DType out : dt == DType::kBF16 && !forced_pairs ? std::vector<DType>{dt, DType::kF32} : std::vector<DType>{dt}) {
      for (const Shape& sh : shapes) {
        for (GroupPattern pat : patterns) {
          for (bool nk : {false, true}) {
            verify::Case c = mode1_case(sh, verify::make_group_sizes(pat, sh.g, sh.m, rng), dt, out, nk);
            gather_from_table(c, sh.m, cases % 2 ? sh.m / 8 + 1 : sh.m + 50, rng);
            c.description += std::string(" gathered from ") + std::to_string(c.lhs_table_rows) + " rows " +
                             verify::group_pattern_name(pat) + " " + spec;
            ++cases;
            const std::string plan = expect_cuda_pass(c, seed++, /*allow_unsupported=*/!hopper, /*repeats=*/3);
            gathered_plans += plan.find("gatherA") != std::string::npos;
            const bool pairs = plan.find("cluster2n") != std::string::npos;
            pair_plans += pairs;
            const bool should_pair = forced_pairs || (!one_cta && planner_pairs(sh.n) && out == dt);
            expected_pairs += should_pair;
            if (hopper) EXPECT_EQ(pairs, should_pair) << c.description << ": " << plan;
          }
        }
      }
    }
  }
  // and with the SwiGLU epilogue (the MoE layer's up projection fusing both), which pairs by the
  // same rule on its [gate | up] width n: halves of 256, of 392 (four tiles, gate boxes past ffn)
  // and of 520 (five tiles)
  if (!small) {
    for (DType dt : {DType::kBF16, DType::kF16}) {
      for (const Shape& sh : {Shape{600, 128, 2 * 256, 4}, Shape{300, 64, 2 * 392, 3}, Shape{300, 64, 2 * 520, 3}}) {
        for (GroupPattern pat : kPatterns) {
          verify::Case c = mode1_case(sh, verify::make_group_sizes(pat, sh.g, sh.m, rng), dt, dt, false);
          c.swiglu = true;
          c.lhs_table_rows = sh.m / 2 + 7;
          for (std::int64_t i = 0; i < sh.m; ++i)
            c.lhs_rows.push_back(std::int32_t(rng.next() % std::uint64_t(c.lhs_table_rows + 2)));  // some past the table
          c.description += std::string(" swiglu gathered ") + verify::group_pattern_name(pat) + " " + spec;
          ++cases;
          const std::string plan = expect_cuda_pass(c, seed++, /*allow_unsupported=*/!hopper, /*repeats=*/3);
          gathered_plans += plan.find("gatherA") != std::string::npos && plan.find("swiglu") != std::string::npos;
          const bool pairs = plan.find("cluster2n") != std::string::npos;
          pair_plans += pairs;
          const bool should_pair = forced_pairs || (!one_cta && planner_pairs(sh.n));
          expected_pairs += should_pair;
          if (hopper) EXPECT_EQ(pairs, should_pair) << c.description << ": " << plan;
        }
      }
    }
  }
  if (hopper) {
    EXPECT_EQ(gathered_plans, cases) << "a gathered case was not planned on the gathering wgmma kernel";
    EXPECT_EQ(pair_plans, expected_pairs);
    if (!one_cta) EXPECT_GE(expected_pairs * 4, cases) << "too few cases in pairs: the test misses its point";
  }
}

// The weight gradient on gathered rows (mode 2, lhs [K, M] whose K rows come through an index:
// the MoE layer's up projection weights when forward read x through the sort's index), against
// cpu_ref on the rows gathered first: every group pattern (empty groups, k tiles running past a
// group's end, sums short of K), m past a multiple of the tile (zero-filled pieces) and of a box,
// n within one tile and over several, rows repeated, out of order and outside the table, 16-bit
// and f32 outputs; three runs each, bitwise the same, and every case planned on the gathering
// mode 2 kernel. `small`: two shapes, two patterns.
void check_gathered_weight_gradient(bool small) {
  const bool hopper = device_is_hopper();
  const std::vector<Shape> shapes =
      small ? std::vector<Shape>{{136, 300, 264, 3}, {64, 200, 128, 2}}
            : std::vector<Shape>{{256, 1000, 320, 4}, {136, 777, 264, 5}, {64, 300, 512, 3}, {392, 500, 136, 3},
                                 {200, 400, 1040, 6}};
  const std::vector<GroupPattern> patterns =
      small ? std::vector<GroupPattern>{GroupPattern::kRandom, GroupPattern::kPartialSum}
            : std::vector<GroupPattern>(std::begin(kPatterns), std::end(kPatterns));
  workloads::SplitMix64 rng(43);
  std::uint64_t seed = 9800;
  int cases = 0, gathered_plans = 0;
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (DType out : {dt, DType::kF32}) {
      for (const Shape& sh : shapes) {
        for (GroupPattern pat : patterns) {
          verify::Case c = shaped(2, sh.m, sh.k, sh.n, verify::make_group_sizes(pat, sh.g, sh.k, rng), dt, out);
          gather_from_table(c, sh.k, cases % 2 ? sh.k / 8 + 1 : sh.k + 50, rng);
          c.description += std::string(" k rows gathered from ") + std::to_string(c.lhs_table_rows) + " rows " +
                           verify::group_pattern_name(pat);
          ++cases;
          const std::string plan = expect_cuda_pass(c, seed++, /*allow_unsupported=*/!hopper, /*repeats=*/3);
          gathered_plans += plan.find("mode2") != std::string::npos && plan.find("gatherA") != std::string::npos;
        }
      }
    }
  }
  if (hopper) EXPECT_EQ(gathered_plans, cases) << "a case was not planned on the gathering mode 2 kernel";
}

TEST(CudaBackend, HopperGatheredWeightGradientSmall) {
  REQUIRE_GPU();
  check_gathered_weight_gradient(true);
}

TEST(CudaBackend, HopperGatheredWeightGradient) {
  REQUIRE_GPU();
  check_gathered_weight_gradient(false);
}

TEST(CudaBackend, HopperGatheredRowsSmall) {
  REQUIRE_GPU();
  check_gathered_rows("", true);
}

TEST(CudaBackend, HopperGatheredRows) {
  REQUIRE_GPU();
  check_gathered_rows("", false);
}

TEST(CudaBackend, HopperGatheredRowsOneCta) {
  REQUIRE_GPU();
  check_gathered_rows("cluster=1", false);
}

TEST(CudaBackend, HopperGatheredRowsSmallForcedPairs) {
  REQUIRE_GPU();
  check_gathered_rows("cluster=2n", true);
}

// CTA pairs of the Hopper family: two CTAs of a cluster take one tile together, along m (256
// rows, RAGDOT_CUDA_VARIANT=cluster=2: each loads half of B and multicasts it to both) or along n
// (2 x bn columns, cluster=2n: each loads one 64-row box of A for both). Mode 1 with both weight
// layouts and mode 2, every group pattern, 16-bit and f32 outputs, both tile widths; shapes where
// one rank has no rows (a group's last pair tile; in mode 2, m past a multiple of 256) or no
// columns (n up to one tile past a multiple of the pair's width), and decode-sized groups; a group
// offset in each mode. Three runs each, bitwise the same, and every case really planned as a pair.
void check_cluster_pairs(const char* spec, const char* plan_says) {
  ScopedVariant pairs(spec);
  const Shape mode1_shapes[] = {{1000, 192, 320, 4}, {777, 136, 264, 3}, {600, 64, 520, 2}, {300, 128, 136, 8},
                                {40, 256, 264, 6},   {300, 128, 256, 3}, {500, 96, 128, 4}};
  const Shape mode2_shapes[] = {{256, 1000, 320, 4}, {136, 777, 264, 5}, {64, 300, 512, 3}, {392, 500, 136, 3},
                                {256, 400, 128, 3}};
  workloads::SplitMix64 rng(53);
  std::uint64_t seed = 11000;
  int cases = 0, pair_plans = 0;
  auto check = [&](const verify::Case& c) {
    ++cases;
    pair_plans += expect_cuda_pass(c, seed++, false, /*repeats=*/3).find(plan_says) != std::string::npos;
  };
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (DType out : {dt, DType::kF32}) {
      for (GroupPattern pat : kPatterns) {
        for (const Shape& sh : mode1_shapes) {
          for (bool nk : {false, true}) {
            verify::Case c = mode1_case(sh, verify::make_group_sizes(pat, sh.g, sh.m, rng), dt, out, nk);
            c.description += std::string(" ") + spec + " " + verify::group_pattern_name(pat);
            check(c);
          }
        }
        for (const Shape& sh : mode2_shapes) {
          auto made = verify::shaped_case(2, sh.m, sh.k, sh.n, verify::make_group_sizes(pat, sh.g, sh.k, rng), dt, out);
          ASSERT_TRUE(made.ok()) << made.status().message();
          made->description += std::string(" ") + spec + " " + verify::group_pattern_name(pat);
          check(*made);
        }
      }
    }
  }
  check(mode1_offset_case());
  check(mode2_offset_case());
  EXPECT_EQ(pair_plans, cases) << "a case was not planned on CTA pairs (" << spec << ")";
}

// A few pair cases of one kind, small enough for compute-sanitizer (scripts/gpu_check.sh runs them
// first, and under the sanitizers once the kind's matrix below passed): both weight layouts, mode
// 2, ranks without rows (m pairs: gs3's pair tiles give rank 1 2 rows, 128, none) or columns (n
// pairs: at n = 264 rank 1 has 8 columns, at n = 128 none), and long k runs (32 k tiles, several
// rings) behind a rank with neither rows nor columns (2 x 2 clusters: rank 3 at m = 100 or 104,
// n = 128 or n = 768 with bn = 256), which must not run ahead of the others. (Mode 2's m is 104:
// its lhs rows, m long, must be a multiple of 8 elements for the tensor cores.) Mode 1's m pairs
// take their tiles from all groups in order: gs7's groups have 2, 2, 1, 3 and 1 tiles of 128 rows
// with empty groups between and rows past the last, so one pair spans two groups (each CTA loads
// its own weights), one has no second tile, and the zero rows after the groups come in pairs too.
void check_cluster_pairs_small(const char* spec, const char* plan_says) {
  ScopedVariant pairs(spec);
  const std::vector<std::int64_t> gs3 = {130, 0, 270}, gs4 = {130, 0, 61, 209}, gs7 = {130, 0, 0, 200, 5, 300, 1};
  std::uint64_t seed = 10500;
  for (const verify::Case& c : {shaped(1, 400, 128, 264, gs3, DType::kBF16, DType::kBF16),
                                gpu_test::weights_nk(400, 128, 128, gs4, DType::kF16, DType::kF32),
                                shaped(1, 900, 192, 264, gs7, DType::kBF16, DType::kBF16),
                                gpu_test::weights_nk(900, 192, 512, gs7, DType::kBF16, DType::kBF16),
                                shaped(2, 72, 400, 264, gs4, DType::kBF16, DType::kF32),
                                shaped(1, 100, 2048, 128, {100}, DType::kBF16, DType::kBF16),
                                shaped(1, 100, 2048, 768, {60, 40}, DType::kBF16, DType::kBF16),
                                shaped(2, 104, 2048, 128, {2048}, DType::kBF16, DType::kBF16)}) {
    const std::string plan = expect_cuda_pass(c, seed++, false, /*repeats=*/3);
    EXPECT_NE(plan.find(plan_says), std::string::npos) << spec << " " << c.description << ": " << plan;
  }
}

TEST(CudaBackend, HopperClusterPairsSmallAlongM) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "CTA pairs with TMA multicast are the Hopper family's";
  check_cluster_pairs_small("cluster=2", "cluster2 ");
}

TEST(CudaBackend, HopperClusterPairsSmallAlongN) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "CTA pairs with TMA multicast are the Hopper family's";
  check_cluster_pairs_small("cluster=2n", "cluster2n ");
}

// 2 x 2 clusters (cluster=4): pairs along m and along n at once, B and A both shared.
TEST(CudaBackend, HopperClusterPairsSmallAlongMN) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "CTA pairs with TMA multicast are the Hopper family's";
  check_cluster_pairs_small("cluster=4", "cluster4 ");
}

TEST(CudaBackend, HopperClusterPairsAlongM) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "CTA pairs with TMA multicast are the Hopper family's";
  check_cluster_pairs("cluster=2", "cluster2 ");
}

TEST(CudaBackend, HopperClusterPairsAlongN) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "CTA pairs with TMA multicast are the Hopper family's";
  check_cluster_pairs("cluster=2n", "cluster2n ");
}

TEST(CudaBackend, HopperClusterPairsAlongMN) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "CTA pairs with TMA multicast are the Hopper family's";
  check_cluster_pairs("cluster=4", "cluster4 ");
}

// An empty dimension (no rows, no columns, an empty contraction) in modes 1 and 2: zeros or
// nothing, never an error (the Hopper family's tensor maps cannot describe an empty operand, so
// such plans do not launch it), on every family.
TEST(CudaBackend, EmptyDimensionsGiveZerosOrNothing) {
  REQUIRE_GPU();
  std::uint64_t seed = 14000;
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
    const auto cases = verify::empty_dimension_cases(dt);
    ASSERT_EQ(cases.size(), 6u);
    for (const verify::Case& c : cases) expect_cuda_pass(c, seed++);
  }
}

// The group patterns and RAGDOT_CUDA_VARIANT settings of the epilogue checks below: all, or for
// their small forms (compute-sanitizer) two patterns, the plain tile and pairs along m.
std::vector<GroupPattern> epilogue_patterns(bool small) {
  if (small) return {GroupPattern::kRandom, GroupPattern::kPartialSum};
  return std::vector<GroupPattern>(std::begin(kPatterns), std::end(kPatterns));
}
std::vector<const char*> epilogue_specs(bool small) {
  if (small) return {"", "cluster=2"};
  return {"", "bn=128", "cluster=2", "cluster=2n", "cluster=4"};
}

// The SwiGLU epilogue (PlanOptions::swiglu_epilogue) of the Hopper family against the oracle's
// product through cpu::swiglu_of_stored: ffn (n / 2) a multiple of the half tile and not (gate
// boxes past ffn), narrower than one half tile, decode-sized groups; every group pattern, both
// 16-bit types, both tile widths and every kind of CTA cluster, and rows gathered through an
// index. Three runs each, bitwise the same, and every case planned with the epilogue. `small`:
// one shape, two patterns, the plain tile and pairs along m (for compute-sanitizer).
void check_swiglu_epilogue(bool small) {
  const std::vector<Shape> shapes = small ? std::vector<Shape>{{300, 128, 2 * 200, 4}}
                                          : std::vector<Shape>{{1000, 192, 2 * 200, 4}, {777, 136, 2 * 256, 3},
                                                               {300, 128, 2 * 64, 8}, {40, 256, 2 * 520, 6}};
  const std::vector<GroupPattern> patterns = epilogue_patterns(small);
  const std::vector<const char*> specs = epilogue_specs(small);
  workloads::SplitMix64 rng(61);
  std::uint64_t seed = 13000;
  int cases = 0, fused_plans = 0;
  auto check = [&](verify::Case c, const char* spec) {
    c.swiglu = true;
    c.description += std::string(" swiglu ") + spec;
    ++cases;
    fused_plans += expect_cuda_pass(c, seed++, false, /*repeats=*/3).find("swiglu") != std::string::npos;
  };
  for (const char* spec : specs) {
    ScopedVariant variant(spec);
    const bool clusters = std::string(spec).rfind("cluster", 0) == 0;  // bf16 only: the tiles are the same
    for (DType dt : clusters ? std::vector<DType>{DType::kBF16} : std::vector<DType>{DType::kBF16, DType::kF16}) {
      for (const Shape& sh : shapes) {
        for (GroupPattern pat : patterns) {
          verify::Case c = mode1_case(sh, verify::make_group_sizes(pat, sh.g, sh.m, rng), dt, dt, false);
          c.description += std::string(" ") + verify::group_pattern_name(pat);
          check(c, spec);
        }
      }
    }
  }
  // gathered rows and the epilogue together (the MoE layer's up projection reading x directly)
  for (GroupPattern pat : patterns) {
    const Shape sh{500, 128, 2 * 136, 4};
    verify::Case c = mode1_case(sh, verify::make_group_sizes(pat, sh.g, sh.m, rng), DType::kBF16, DType::kBF16, false);
    c.lhs_table_rows = 97;
    for (std::int64_t i = 0; i < sh.m; ++i) c.lhs_rows.push_back(std::int32_t(rng.next() % 100));  // some past the table
    c.description += std::string(" gathered ") + verify::group_pattern_name(pat);
    check(c, "");
  }
  EXPECT_EQ(fused_plans, cases) << "a case was not planned with the SwiGLU epilogue";
}

TEST(CudaBackend, HopperSwigluEpilogue) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "the SwiGLU epilogue is the Hopper family's";
  check_swiglu_epilogue(false);
}

TEST(CudaBackend, HopperSwigluEpilogueSmall) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "the SwiGLU epilogue is the Hopper family's";
  check_swiglu_epilogue(true);
}

// Rows added into a table (PlanOptions::out_scatter_rows) by the Hopper family's epilogue, against
// the float64 sums of the oracle's rounded rows: several rows into one table row (as an MoE
// token's top-k rows), rows dropped (-1, past the table: the check's guard after the table must
// stay untouched), every group pattern, both 16-bit types, both weight layouts, both tile widths,
// every kind of CTA cluster, gathered rows, a group offset (rows of other groups: zero tiles,
// which add nothing); the table starts with values the plan must add to. Every case planned with
// the epilogue. `small`: one shape, two patterns, the plain tile and pairs along m.
void check_scatter_add_rows(bool small) {
  const std::vector<Shape> shapes = small ? std::vector<Shape>{{300, 128, 136, 8}}
                                          : std::vector<Shape>{{1000, 192, 320, 4}, {777, 136, 264, 3},
                                                               {300, 128, 136, 8}, {40, 256, 520, 6}};
  const std::vector<GroupPattern> patterns = epilogue_patterns(small);
  const std::vector<const char*> specs = epilogue_specs(small);
  workloads::SplitMix64 rng(67);
  std::uint64_t seed = 15000;
  int cases = 0, scatter_plans = 0;
  auto check = [&](verify::Case c, const char* spec) {
    const std::int64_t m = c.spec.lhs.shape[0];
    c.out_table_rows = m / 4 + 3;
    for (std::int64_t i = 0; i < m; ++i) {
      const std::uint64_t pick = rng.next() % 32;
      c.out_rows.push_back(pick == 0   ? -1
                           : pick == 1 ? std::int32_t(c.out_table_rows)
                                       : std::int32_t(rng.next() % std::uint64_t(c.out_table_rows)));
      c.row_scales.push_back(float(rng.uniform()));
    }
    c.description += std::string(" scattered ") + spec;
    ++cases;
    scatter_plans += expect_cuda_pass(c, seed++).find("scatter") != std::string::npos;
  };
  for (const char* spec : specs) {
    ScopedVariant variant(spec);
    const bool clusters = std::string(spec).rfind("cluster", 0) == 0;  // bf16, [E, K, N] only: the same tiles
    for (DType dt : clusters ? std::vector<DType>{DType::kBF16} : std::vector<DType>{DType::kBF16, DType::kF16}) {
      for (bool nk : clusters || small ? std::vector<bool>{false} : std::vector<bool>{false, true}) {
        for (const Shape& sh : shapes) {
          for (GroupPattern pat : patterns) {
            verify::Case c = mode1_case(sh, verify::make_group_sizes(pat, sh.g, sh.m, rng), dt, dt, nk);
            c.description += std::string(" ") + verify::group_pattern_name(pat);
            check(c, spec);
          }
        }
      }
    }
  }
  for (GroupPattern pat : patterns) {  // gathered rows in, scattered rows out: the whole MoE down-and-combine
    const Shape sh{500, 128, 136, 4};
    verify::Case c = mode1_case(sh, verify::make_group_sizes(pat, sh.g, sh.m, rng), DType::kBF16, DType::kBF16, false);
    c.lhs_table_rows = 97;
    for (std::int64_t i = 0; i < sh.m; ++i) c.lhs_rows.push_back(std::int32_t(rng.next() % 100));
    c.description += std::string(" gathered ") + verify::group_pattern_name(pat);
    check(c, "");
  }
  check(mode1_offset_case(), "");  // groups [2, 4) of 5: the rows of the others are zero tiles
  EXPECT_EQ(scatter_plans, cases) << "a case was not planned with the scattering epilogue";
}

TEST(CudaBackend, HopperScatterAddRows) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "adding rows into a table is the Hopper family's";
  check_scatter_add_rows(false);
}

TEST(CudaBackend, HopperScatterAddRowsSmall) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "adding rows into a table is the Hopper family's";
  check_scatter_add_rows(true);
}

// The MoE down projection's combine at a layer's scale: qwen3-30b-a3b's down projection (128
// experts, k 768, n 2048) for 512 to 4096 tokens' top-8 rows, every token receiving exactly eight
// rows, so the 256-wide tile runs and each CTA takes up to ~16 tiles one after another, which the
// checks above (one or two tiles per CTA) do not reach. The float64 sums are checked on a sample
// of the table's rows (Case::table_row_stride).
TEST(CudaBackend, HopperScatterAddRowsAtLayerScale) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "adding rows into a table is the Hopper family's";
  const std::int64_t top_k = 8, experts = 128;
  workloads::SplitMix64 rng(71);
  std::uint64_t seed = 15900;
  for (std::int64_t tokens : {512, 1024, 2048, 4096}) {
    for (GroupPattern pattern : {GroupPattern::kUniform, GroupPattern::kRandom}) {
      const Shape sh{tokens * top_k, 768, 2048, experts};
      verify::Case c =
          mode1_case(sh, verify::make_group_sizes(pattern, sh.g, sh.m, rng), DType::kBF16, DType::kBF16, false);
      c.out_table_rows = tokens;
      c.table_row_stride = tokens / 16;
      for (std::int64_t i = 0; i < sh.m; ++i) c.out_rows.push_back(std::int32_t(i / top_k));
      for (std::int64_t i = sh.m - 1; i > 0; --i) {
        std::swap(c.out_rows[std::size_t(i)], c.out_rows[std::size_t(rng.next() % std::uint64_t(i + 1))]);
      }
      for (std::int64_t i = 0; i < sh.m; ++i) c.row_scales.push_back(float(rng.uniform()));
      c.description += " " + std::to_string(tokens) + " tokens' top-8 rows, " + verify::group_pattern_name(pattern);
      EXPECT_NE(expect_cuda_pass(c, seed++).find("scatter"), std::string::npos);
    }
  }
}

// How a split-tail plan splits a mode 1 case's tiles (kernels/ragdot/split.h), worked out on the
// host from the plan's tile width and grid, as the kernel will: the test knows the group sizes.
RagdotSplit expected_split(const std::string& plan, const std::vector<std::int64_t>& group_sizes, std::int64_t k,
                           std::int64_t n) {
  std::smatch tile, grid;
  const bool found = std::regex_search(plan, tile, std::regex(R"(128x(\d+)x64)")) &&
                     std::regex_search(plan, grid, std::regex(R"(grid=(\d+)x)"));
  EXPECT_TRUE(found) << "no tile width or grid in the plan: " << plan;
  if (!found) return ragdot_split_plan(0, 0, 1, 0, 1);
  const std::int64_t bn = std::stoll(tile[1]), ctas = std::stoll(grid[1]), n_tiles = (n + bn - 1) / bn;
  std::int64_t m_tiles = 0;
  for (std::int64_t g : group_sizes) m_tiles += (g + 127) / 128;
  const int compute = int(m_tiles * n_tiles);
  // (the zero tiles after them do not change the split)
  return ragdot_split_plan(compute, compute, int(ctas), int((k + 63) / 64), RAGDOT_SPLIT_MAX_PIECES);
}

// The last wave's tiles split along k (RAGDOT_CUDA_VARIANT=split=tail): pieces of one tile on
// different CTAs, their partial sums added by the last to arrive. Deep enough k (12 to 24 steps)
// for two to four pieces, every group pattern, both weight layouts, 16-bit and f32 outputs, both
// tile widths, the SwiGLU and table-row epilogues and gathered rows; on the whole grid (fewer
// tiles than CTAs: every tile split, idle CTAs take the pieces) and on a grid capped at 4 or 6
// CTAs (whole waves first, then the split ones). Three runs each, bitwise the same (the slots are
// added in piece order, whichever piece arrives last). The test works out each case's split as
// the kernel will and requires most cases to split, some after whole waves. `small`: one shape,
// two patterns, the whole grid and 4 CTAs (HopperSplitTailCountsItsPieces has known splits after
// whole waves; scripts/gpu_check.sh runs both under compute-sanitizer).
void check_split_tail(bool small) {
  // (narrow and short, deep only in k: the float64 oracle's time grows with m k n)
  const std::vector<Shape> shapes = small ? std::vector<Shape>{{500, 1024, 264, 3}}
                                          : std::vector<Shape>{{400, 1024, 136, 3}, {300, 768, 264, 4},
                                                               {250, 1536, 128, 2}};
  const std::vector<GroupPattern> patterns = epilogue_patterns(small);
  const std::vector<const char*> specs =
      small ? std::vector<const char*>{"split=tail", "split=tail,ctas=4"}
            : std::vector<const char*>{"split=tail", "split=tail,ctas=4", "split=tail,ctas=6", "split=tail,bn=128"};
  workloads::SplitMix64 rng(83);
  std::uint64_t seed = 17000;
  int cases = 0, split_plans = 0, split_cases = 0, after_whole_waves = 0;
  auto check = [&](verify::Case c, const Shape& sh, const char* spec) {
    c.description += std::string(" ") + spec;
    ++cases;
    const std::string plan = expect_cuda_pass(c, seed++, false, /*repeats=*/3);
    split_plans += plan.find("splittail") != std::string::npos;
    const RagdotSplit split = expected_split(plan, c.group_sizes, sh.k, sh.n);
    split_cases += split.pieces > 1;
    after_whole_waves += split.pieces > 1 && split.first_split > 0;
  };
  for (const char* spec : specs) {
    ScopedVariant variant(spec);
    const bool plain = std::string(spec) == "split=tail";
    // every dtype and layout on the whole grid; bf16 with [E, K, N] weights on the others
    for (DType dt : plain ? std::vector<DType>{DType::kBF16, DType::kF16} : std::vector<DType>{DType::kBF16}) {
      for (DType out : plain && !small && dt == DType::kBF16 ? std::vector<DType>{dt, DType::kF32} : std::vector<DType>{dt}) {
        for (bool nk : plain && !small ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
          for (const Shape& sh : shapes) {
            for (GroupPattern pat : patterns) {
              verify::Case c = mode1_case(sh, verify::make_group_sizes(pat, sh.g, sh.m, rng), dt, out, nk);
              c.description += std::string(" ") + verify::group_pattern_name(pat);
              check(c, sh, spec);
            }
          }
        }
      }
    }
    if (small) continue;
    // the epilogues that run after the sums are joined, and gathered rows
    for (GroupPattern pat : patterns) {
      const Shape sh{300, 1024, 2 * 136, 3};
      const auto gs = verify::make_group_sizes(pat, sh.g, sh.m, rng);
      verify::Case swiglu = mode1_case(sh, gs, DType::kBF16, DType::kBF16, false);
      swiglu.swiglu = true;
      swiglu.description += std::string(" swiglu ") + verify::group_pattern_name(pat);
      check(swiglu, sh, spec);
      verify::Case table = mode1_case(sh, gs, DType::kBF16, DType::kBF16, false);
      table.out_table_rows = sh.m / 4 + 3;
      for (std::int64_t i = 0; i < sh.m; ++i) {
        table.out_rows.push_back(std::int32_t(rng.next() % std::uint64_t(table.out_table_rows + 1)));  // some dropped
        table.row_scales.push_back(float(rng.uniform()));
      }
      table.description += std::string(" scattered ") + verify::group_pattern_name(pat);
      check(table, sh, spec);
      verify::Case gathered = mode1_case(sh, gs, DType::kBF16, DType::kBF16, true);
      gathered.lhs_table_rows = 301;
      for (std::int64_t i = 0; i < sh.m; ++i) gathered.lhs_rows.push_back(std::int32_t(rng.next() % 310));
      gathered.description += std::string(" gathered ") + verify::group_pattern_name(pat);
      check(gathered, sh, spec);
    }
  }
  EXPECT_EQ(split_plans, cases) << "a case was not planned with split tiles";
  // (about 70%: no case of empty groups splits, and on 4 or 6 CTAs only last waves at most half full)
  EXPECT_GE(split_cases * 10, cases * 6) << "fewer than 60% of the cases split a tile: the test misses its point";
  if (!small) EXPECT_GT(after_whole_waves, 10) << "too few cases split their last wave after whole ones";
  std::fprintf(stderr, "  %d cases, %d split tiles, %d of them after whole waves\n", cases, split_cases,
               after_whole_waves);
}

// (the small cases first: scripts/gpu_check.sh runs the matrix only if they pass, since a piece
// protocol that deadlocks hangs its test)
TEST(CudaBackend, HopperSplitTailSmall) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "split tiles are the Hopper family's";
  check_split_tail(true);
}

TEST(CudaBackend, HopperSplitTail) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "split tiles are the Hopper family's";
  check_split_tail(false);
}

// Under a mode 1 override whose plans name `says`: a bf16 case of `many.g` random groups, whose
// scheduler table leaves room for three stages, not four, must be planned "s3 <says>" (returns
// whether it was planned `says`); and an f32-output case on `f32_shape`, for which the key is
// ignored, must not be, and still be right.
bool expect_many_groups_and_f32(const Shape& many, const Shape& f32_shape, const std::string& says,
                                workloads::SplitMix64& rng, std::uint64_t& seed) {
  verify::Case c = mode1_case(many, verify::make_group_sizes(GroupPattern::kRandom, many.g, many.m, rng), DType::kBF16,
                              DType::kBF16, false);
  c.description += " " + says + " " + std::to_string(many.g) + " groups";
  const std::string plan = expect_cuda_pass(c, seed++, false, /*repeats=*/3);
  EXPECT_NE(plan.find("s3 " + says), std::string::npos) << plan;
  verify::Case f32 = mode1_case(f32_shape, verify::make_group_sizes(GroupPattern::kRandom, f32_shape.g, f32_shape.m, rng),
                                DType::kBF16, DType::kF32, false);
  EXPECT_EQ(expect_cuda_pass(f32, seed++).find(says), std::string::npos);
  return plan.find(says) != std::string::npos;
}

// Swapped operands (RAGDOT_CUDA_VARIANT=swap=ab): out^T = W^T x^T, 256 weight columns by up to
// 160 token rows per tile, the rows as wgmma's N in steps of 16 (one k loop per N), the output
// transposed back through movmatrix, in four pipeline stages (three with 3000 groups, whose
// scheduler table takes the room of one). Groups of 1 to 160 rows and more (a group's rows in tiles of
// 160 and a last one of any size), empty groups, a tail no group covers, n below one tile and
// past a multiple of it (the second warpgroup without columns), both weight layouts, both 16-bit
// types; three runs each, bitwise the same, and every case planned swapped. `small`: one shape,
// two patterns (for compute-sanitizer).
// `pairs`: the same in CTA pairs along m (swap=ab,cluster=2), every case planned so, plus skewed
// groups whose consecutive tiles pair inside a group (sharing the weight tile) and across groups
// (sharing nothing), a pair whose second CTA has no rows, and a grid of two pairs that runs
// many tiles each.
void check_swapped_operands(bool small, bool pairs = false) {
  const std::vector<Shape> shapes = small ? std::vector<Shape>{{500, 128, 264, 4}}
                                          : std::vector<Shape>{{1000, 192, 320, 4}, {777, 136, 264, 3},
                                                               {600, 64, 520, 2},   {300, 128, 136, 8},
                                                               {40, 256, 264, 6},   {2000, 64, 256, 3},
                                                               {777, 136, 328, 3}};
  const std::vector<GroupPattern> patterns = epilogue_patterns(small);
  const std::string spec = pairs ? "swap=ab,cluster=2" : "swap=ab";
  ScopedVariant swap(spec);
  workloads::SplitMix64 rng(pairs ? 97 : 89);
  std::uint64_t seed = pairs ? 19500 : 19000;
  int cases = 0, swapped = 0;
  auto planned_swapped = [&](const std::string& plan) {
    return plan.find("swapAB") != std::string::npos && (!pairs || plan.find("cluster2 ") != std::string::npos);
  };
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (bool nk : small ? std::vector<bool>{false} : std::vector<bool>{false, true}) {
      for (const Shape& sh : shapes) {
        for (GroupPattern pat : patterns) {
          verify::Case c = mode1_case(sh, verify::make_group_sizes(pat, sh.g, sh.m, rng), dt, dt, nk);
          c.description += " " + spec + " " + verify::group_pattern_name(pat);
          ++cases;
          swapped += planned_swapped(expect_cuda_pass(c, seed++, false, /*repeats=*/3));
        }
      }
    }
  }
  if (pairs) {
    // 700 rows: five tiles, two pairs inside the group and a fifth paired with the next group's
    // tile; 330 rows: three tiles, the second and third (160 and 10 rows) a pair; 17 tiles in
    // all, so the last pair's second CTA has no rows; 520 columns: the third column tile's second
    // warpgroup past n; 59 rows past the groups, which the pairs write as zeros
    const std::vector<std::int64_t> skewed = {700, 0, 1, 17, 40, 90, 3, 160, 330, 161, 5};
    std::int64_t m = 0;
    for (std::int64_t r : skewed) m += r;
    for (bool nk : {false, true}) {
      const DType dt = nk ? DType::kF16 : DType::kBF16;
      verify::Case c = mode1_case({m + 59, 128, 520, std::int64_t(skewed.size())}, skewed, dt, dt, nk);
      c.description += " " + spec + " skewed";
      ++cases;
      swapped += planned_swapped(expect_cuda_pass(c, seed++, false, /*repeats=*/3));
    }
    ScopedVariant few(spec + ",ctas=4");
    verify::Case c = mode1_case({m + 59, 192, 520, std::int64_t(skewed.size())}, skewed, DType::kBF16, DType::kBF16, false);
    c.description += " " + spec + ",ctas=4 skewed";
    ++cases;
    swapped += planned_swapped(expect_cuda_pass(c, seed++, false, /*repeats=*/3));
  }
  if (!small) {
    // every row count of one tile, in one group each: every instruction's N (16 to 160), each row
    // count it rounds up, three k steps per loop; 200 columns: the second warpgroup's second
    // slice partly past n; both weight layouts
    std::vector<std::int64_t> sizes;
    for (std::int64_t r = 1; r <= 170; ++r) sizes.push_back(r);
    std::int64_t m = 0;
    for (std::int64_t r : sizes) m += r;
    for (bool nk : {false, true}) {
      const DType dt = nk ? DType::kF16 : DType::kBF16;
      verify::Case c = mode1_case({m + 5, 192, 200, std::int64_t(sizes.size())}, sizes, dt, dt, nk);
      c.description += " " + spec + " groups of 1 to 170 rows";
      ++cases;
      swapped += planned_swapped(expect_cuda_pass(c, seed++, false, /*repeats=*/3));
    }
    // 3000 groups: a scheduler table that leaves room for three stages, not four (the cases above
    // have four)
    ++cases;
    swapped += expect_many_groups_and_f32({1000, 64, 8, 3000}, shapes[0], pairs ? "cluster2 swapAB" : "swapAB", rng, seed);
  }
  EXPECT_EQ(swapped, cases) << "a case was not planned with swapped operands" << (pairs ? " in CTA pairs" : "");
}

TEST(CudaBackend, HopperSwappedOperandsSmall) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "swapped operands are the Hopper family's";
  check_swapped_operands(true);
}

TEST(CudaBackend, HopperSwappedOperands) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "swapped operands are the Hopper family's";
  check_swapped_operands(false);
}

TEST(CudaBackend, HopperSwappedPairsSmall) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "swapped operands are the Hopper family's";
  check_swapped_operands(true, /*pairs=*/true);
}

TEST(CudaBackend, HopperSwappedPairs) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "swapped operands are the Hopper family's";
  check_swapped_operands(false, /*pairs=*/true);
}

// Group sizes like a skewed router's (kernels/ragdot/tile_order.h): a few groups of many rows and
// many of a few, the busy ones first (`hot_first`) or last, some empty in between, summing to
// about 90% of m (a tail no group covers).
std::vector<std::int64_t> skewed_sizes(std::int64_t groups, std::int64_t m, bool hot_first,
                                       workloads::SplitMix64& rng) {
  std::vector<double> weight(std::size_t(groups), 0.0);
  double total = 0;
  for (std::int64_t g = 0; g < groups; ++g) {
    if (g % 7 == 3) continue;  // empty
    weight[std::size_t(g)] = std::pow(double(g + 1), -1.2) * (0.75 + 0.5 * rng.uniform());
    total += weight[std::size_t(g)];
  }
  std::vector<std::int64_t> sizes;
  for (double w : weight) sizes.push_back(std::int64_t(0.9 * double(m) * w / total));
  if (!hot_first) std::reverse(sizes.begin(), sizes.end());
  return sizes;
}

// The planner's own swapped operands (about one 160-row tile of rows per group, weights at least
// 1024 wide: deepseek-v3's prefill, kernel_variant.cpp's swapped_operands_pay), on smaller m and
// k so that the oracle keeps up: balanced groups and a skewed set (one group over four tiles),
// empty groups, a tail no group covers, both weight layouts, both 16-bit types; each planned
// swapped, three runs bitwise the same. Then the overrides that ask for the plain tile (swap=off, split
// tiles, CTA pairs), planned unswapped and still right.
TEST(CudaBackend, HopperSwappedByDefault) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "swapped operands are the Hopper family's";
  workloads::SplitMix64 rng(101);
  std::uint64_t seed = 25000;
  // (8 groups of ~128 rows: the float64 oracle takes a few seconds a case)
  const Shape sh{8 * 128, 512, 1032, 8};
  const std::vector<std::int64_t> balanced = {150, 96, 0, 131, 159, 97, 128, 143};  // 904 of 1024 rows
  const std::vector<std::int64_t> skewed = {700, 0, 1, 17, 40, 90, 3, 160};
  int cases = 0, swapped = 0;
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (bool nk : {false, true}) {
      for (bool skew : {false, true}) {
        if (dt == DType::kF16 && skew) continue;
        verify::Case c = mode1_case(sh, skew ? skewed : balanced, dt, dt, nk);
        c.description += skew ? " default, skewed" : " default, balanced";
        ++cases;
        swapped += expect_cuda_pass(c, seed++, false, /*repeats=*/3).find("swapAB") != std::string::npos;
      }
    }
  }
  EXPECT_EQ(swapped, cases) << "a case was not planned with swapped operands";
  for (const char* spec : {"swap=off", "split=tail", "cluster=2"}) {
    ScopedVariant variant(spec);
    verify::Case c = mode1_case(sh, balanced, DType::kBF16, DType::kBF16, false);
    c.description += std::string(" ") + spec;
    const std::string plan = expect_cuda_pass(c, seed++, false, 3);
    EXPECT_EQ(plan.find("swapAB"), std::string::npos) << plan;
  }
}

// The mixed order (kernels/ragdot/tile_order.h; opt-in, RAGDOT_CUDA_VARIANT=order=mix, or
// order=auto, which takes it in launches whose largest group has 4x the mean rows): groups ranked
// by size on the device, tiles handed out from both ends of that list in turn. Against the oracle,
// three runs each bitwise the same: skewed sizes with the busy groups first and last, and every
// group pattern (zeros, one group with every row, a tail no group covers, equal sizes, odd sizes),
// 40 to 300 groups, n short of a tile and past it; under order=mix bf16 with both weight layouts
// and f16, then (two shapes, the skewed sizes, one group with every row and a tail no group
// covers) order=auto, 128-wide tiles, swapped operands, split tiles on few CTAs, CTA pairs along
// m (which pair the groups' tiles in the plain order, so they must be planned without the mixed
// one) and n, few CTAs, and a group offset. order=plain, f32 outputs (the order is the family's, not
// the epilogue's) and 1100 groups (past what the packed table holds: the plain order) too.
// `small`: one shape, the skewed sizes, the plain tile and swapped operands (compute-sanitizer).
void check_mixed_order(bool small) {
  const std::vector<Shape> shapes = small ? std::vector<Shape>{{2000, 128, 264, 40}}
                                          : std::vector<Shape>{{3000, 128, 264, 64}, {2500, 64, 136, 300},
                                                               {3000, 128, 520, 40}};
  const std::vector<const char*> specs =
      small ? std::vector<const char*>{"order=mix", "order=mix,swap=ab"}
            : std::vector<const char*>{"order=mix",           "order=auto",
                                       "order=mix,bn=128",    "order=mix,swap=ab",
                                       "order=mix,split=tail,ctas=6", "order=mix,cluster=2",
                                       "order=mix,cluster=2n", "order=mix,ctas=5"};
  workloads::SplitMix64 rng(97);
  std::uint64_t seed = 23000;
  int cases = 0, as_asked = 0;
  auto check = [&](verify::Case c, const char* spec) {
    c.description += std::string(" ") + spec;
    ++cases;
    const std::string says = std::string(spec) == "order=auto" ? "order=auto" : "order=mix";
    const std::string plan = expect_cuda_pass(c, seed++, false, /*repeats=*/3);
    if (std::string(spec) == "order=mix,cluster=2") as_asked += plan.find("order=") == std::string::npos;
    else as_asked += plan.find(says) != std::string::npos;
  };
  for (const char* spec : specs) {
    ScopedVariant variant(spec);
    const bool main = std::string(spec) == "order=mix" && !small;
    const std::vector<GroupPattern> patterns =
        small ? std::vector<GroupPattern>{}
        : main ? std::vector<GroupPattern>(std::begin(kPatterns), std::end(kPatterns))
               : std::vector<GroupPattern>{GroupPattern::kAllInOne, GroupPattern::kPartialSum};
    for (DType dt : main ? std::vector<DType>{DType::kBF16, DType::kF16} : std::vector<DType>{DType::kBF16}) {
      for (bool nk : main && dt == DType::kBF16 ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
        for (const Shape& sh : main || small ? shapes : std::vector<Shape>(shapes.begin(), shapes.begin() + 2)) {
          for (bool hot_first : {true, false}) {
            verify::Case c = mode1_case(sh, skewed_sizes(sh.g, sh.m, hot_first, rng), dt, dt, nk);
            c.description += hot_first ? " busy groups first" : " busy groups last";
            check(c, spec);
          }
          for (GroupPattern pat : patterns) {
            verify::Case c = mode1_case(sh, verify::make_group_sizes(pat, sh.g, sh.m, rng), dt, dt, nk);
            c.description += std::string(" ") + verify::group_pattern_name(pat);
            check(c, spec);
          }
        }
      }
    }
    if (small) continue;
    // a group offset: groups [30, 78) of 100, rhs holding the 48
    verify::Case off;
    off.spec.lhs = {DType::kBF16, {3000, 128}};
    off.spec.rhs = {DType::kBF16, {48, 128, 264}};
    off.spec.group_sizes = {DType::kI32, {100}};
    off.spec.dims = RaggedDotDimensionNumbers::ragged_dot();
    off.spec.group_offset = GroupOffset{48};
    off.group_sizes = skewed_sizes(100, 3000, false, rng);
    off.group_offset = 30;
    off.description = "mode1 group offset 30 of 100, 48 local, skewed";
    check(off, spec);
  }
  EXPECT_EQ(as_asked, cases) << "a case was not planned in the order it asked for";

  // the plain order: order=plain, and 1100 groups (past RAGDOT_ORDER_MAX_GROUPS)
  auto expect_plain = [&](verify::Case c, const char* what) {
    c.description += what;
    const std::string plan = expect_cuda_pass(c, seed++, false, 3);
    EXPECT_EQ(plan.find("order="), std::string::npos) << plan;
  };
  {
    ScopedVariant variant("order=plain");
    expect_plain(mode1_case(shapes[0], skewed_sizes(shapes[0].g, shapes[0].m, true, rng), DType::kBF16, DType::kBF16,
                            false),
                 " order=plain");
  }
  if (!small) {
    ScopedVariant variant("order=mix");
    const Shape many{3000, 64, 136, 1100};
    expect_plain(mode1_case(many, verify::make_group_sizes(GroupPattern::kRandom, many.g, many.m, rng), DType::kBF16,
                            DType::kBF16, false),
                 " 1100 groups");
    verify::Case f32 = mode1_case(shapes[0], skewed_sizes(shapes[0].g, shapes[0].m, true, rng), DType::kBF16,
                                  DType::kF32, false);
    f32.description += " f32 out";
    EXPECT_NE(expect_cuda_pass(f32, seed++, false, 3).find("order=mix"), std::string::npos);
  }
  std::fprintf(stderr, "  %d cases in the order they asked for\n", as_asked);
}

TEST(CudaBackend, HopperMixedOrderSmall) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "the mixed order is the Hopper family's";
  check_mixed_order(true);
}

TEST(CudaBackend, HopperMixedOrder) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "the mixed order is the Hopper family's";
  check_mixed_order(false);
}

// The forward's TMA-store epilogue (RAGDOT_CUDA_VARIANT=epilogue=tma in mode 1): a consumer
// warpgroup whose 64 rows all lie in the tile's group sends them out in boxes of 64 x 32 through
// two staging buffers; one with fewer (a group's last rows, which share the box with the next
// group's) stores them from the registers, so both paths alternate within a launch. The cases:
// groups of multiples of 64 rows and of odd sizes, empty groups, one group with every row, a tail
// no group covers; n a multiple of 32, 8 past one (the last box clipped by the map) and short of
// a whole tile (boxes past n skipped); both weight layouts, both 16-bit types, gathered rows,
// both tile widths, a group offset, and 600 groups (a scheduler table that leaves three stages of
// a 256-wide tile, not four). Three
// runs each, bitwise the same; every 16-bit case planned with the TMA store, f32 outputs not.
// `small`: one shape, two patterns, both weight layouts (for compute-sanitizer).
void check_forward_tma_store(bool small) {
  const std::vector<Shape> shapes = small ? std::vector<Shape>{{700, 128, 264, 4}}
                                          : std::vector<Shape>{{1000, 192, 320, 4}, {777, 136, 264, 3},
                                                               {640, 64, 200, 5}, {300, 128, 136, 8}};
  const std::vector<GroupPattern> patterns = epilogue_patterns(small);
  workloads::SplitMix64 rng(97);
  std::uint64_t seed = 21000;
  int cases = 0, tma_plans = 0;
  auto check = [&](verify::Case c, const std::string& what) {
    c.description += " epilogue=tma " + what;
    ++cases;
    tma_plans += expect_cuda_pass(c, seed++, false, /*repeats=*/3).find("tmastore") != std::string::npos;
  };
  // (buffers=3: three boxes in flight per warpgroup, each box's buffer taken in turn modulo 3)
  for (const char* spec : small ? std::vector<const char*>{"epilogue=tma", "epilogue=tma,buffers=3"}
                                : std::vector<const char*>{"epilogue=tma", "epilogue=tma,bn=128", "epilogue=tma,buffers=4"}) {
    ScopedVariant tma(spec);
    for (DType dt : {DType::kBF16, DType::kF16}) {
      for (bool nk : {false, true}) {
        if (small && dt == DType::kF16) continue;
        for (const Shape& sh : shapes) {
          for (GroupPattern pat : patterns)
            check(mode1_case(sh, verify::make_group_sizes(pat, sh.g, sh.m, rng), dt, dt, nk),
                  std::string(spec) + " " + verify::group_pattern_name(pat));
          // whole warpgroups and partial ones in turn: sizes of 64 r and 64 r + a few
          const std::vector<std::int64_t> mixed = {128, 67, 64, 0, 192, 1};
          std::int64_t m = 0;
          for (std::int64_t g : mixed) m += g;
          check(mode1_case({m + 40, sh.k, sh.n, std::int64_t(mixed.size())}, mixed, dt, dt, nk),
                std::string(spec) + " groups of 64 r and 64 r + a few");
        }
      }
    }
    if (small) continue;
    // gathered rows
    const Shape sh{500, 128, 264, 4};
    verify::Case gathered = mode1_case(sh, verify::make_group_sizes(GroupPattern::kRandom, sh.g, sh.m, rng),
                                       DType::kBF16, DType::kBF16, true);
    gathered.lhs_table_rows = 401;
    for (std::int64_t i = 0; i < sh.m; ++i) gathered.lhs_rows.push_back(std::int32_t(rng.next() % 410));
    check(gathered, std::string(spec) + " gathered");
  }
  if (!small) {
    ScopedVariant tma("epilogue=tma");
    // 600 groups: the largest scheduler table, three stages
    ++cases;
    tma_plans += expect_many_groups_and_f32({40000, 64, 264, 600}, shapes[0], "tmastore", rng, seed);
    // a group offset: the rows of the groups not computed are zero tiles, some of 64 rows and more
    ++cases;
    tma_plans += expect_cuda_pass(mode1_offset_case(), seed++, false, /*repeats=*/3).find("tmastore") != std::string::npos;
  }
  EXPECT_EQ(tma_plans, cases) << "a case was not planned with the TMA-store epilogue";
}

TEST(CudaBackend, HopperForwardTmaStoreSmall) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "the TMA-store epilogue is the Hopper family's";
  check_forward_tma_store(true);
}

TEST(CudaBackend, HopperForwardTmaStore) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "the TMA-store epilogue is the Hopper family's";
  check_forward_tma_store(false);
}

// Overlapped stores (RAGDOT_CUDA_VARIANT=overlap=on): a consumer warpgroup keeps its tile's
// outputs as 16-bit words and stores them during its next tile's k loop, once two k steps are
// issued, or after it when the tile has one k step (k = 64), before an idle tile's barriers, and
// after the last tile. The cases: every group pattern (empty groups, odd sizes, one group with
// every row, a tail no group covers: zero tiles), k of one, two and three steps, n short of a tile
// and past one, both 16-bit types, both tile widths, CTA pairs along n, three CTAs (every CTA takes
// many tiles in a row), a group offset. Three runs each, bitwise the same; every case with [G, K, N]
// weights planned with the overlapped stores, and [G, N, K] weights (whose producer has no
// registers to spare for them) planned without. `small`: one shape, two patterns, one CTA.
void check_overlapped_stores(bool small) {
  const std::vector<Shape> shapes = small ? std::vector<Shape>{{700, 128, 264, 4}}
                                          : std::vector<Shape>{{1000, 64, 320, 4}, {777, 136, 264, 3},
                                                               {640, 192, 200, 5}, {300, 128, 520, 8}};
  const std::vector<GroupPattern> patterns = epilogue_patterns(small);
  workloads::SplitMix64 rng(131);
  std::uint64_t seed = 31000;
  int cases = 0, overlap_plans = 0, nk_overlap_plans = 0;
  const std::vector<const char*> specs =
      small ? std::vector<const char*>{"overlap=on"}
            : std::vector<const char*>{"overlap=on", "overlap=on,bn=128", "overlap=on,cluster=2n", "overlap=on,ctas=3"};
  for (const char* spec : specs) {
    ScopedVariant overlap(spec);
    for (DType dt : {DType::kBF16, DType::kF16}) {
      if (small && dt == DType::kF16) continue;
      for (const Shape& sh : shapes) {
        for (GroupPattern pat : patterns) {
          verify::Case c = mode1_case(sh, verify::make_group_sizes(pat, sh.g, sh.m, rng), dt, dt, false);
          c.description += std::string(" ") + spec + " " + verify::group_pattern_name(pat);
          ++cases;
          overlap_plans += expect_cuda_pass(c, seed++, false, /*repeats=*/3).find("overlapstore") != std::string::npos;
        }
        verify::Case nk = mode1_case(sh, verify::make_group_sizes(GroupPattern::kRandom, sh.g, sh.m, rng), dt, dt, true);
        nk.description += std::string(" ") + spec + " weights [G, N, K]";
        nk_overlap_plans += expect_cuda_pass(nk, seed++).find("overlapstore") != std::string::npos;
      }
    }
    if (small) continue;
    ++cases;
    overlap_plans += expect_cuda_pass(mode1_offset_case(), seed++, false, /*repeats=*/3).find("overlapstore") !=
                     std::string::npos;
  }
  EXPECT_EQ(overlap_plans, cases) << "a case with [G, K, N] weights was not planned with overlapped stores";
  EXPECT_EQ(nk_overlap_plans, 0) << "a case with [G, N, K] weights was planned with overlapped stores";
}

TEST(CudaBackend, HopperOverlappedStoresSmall) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "overlapped stores are the Hopper family's";
  check_overlapped_stores(true);
}

TEST(CudaBackend, HopperOverlappedStores) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "overlapped stores are the Hopper family's";
  check_overlapped_stores(false);
}

// The 192-row tile (RAGDOT_CUDA_VARIANT=bm=192): three consumer warpgroups of 64 rows each, so a
// group's last tile may leave one, two or all three with rows, and A comes in one to three boxes.
// The cases: every group pattern (empty groups, odd sizes, one group with every row, a tail no
// group covers: zero tiles), group sizes around multiples of 64 and 192, k of one, two and three
// steps, n short of a tile, between tiles and past several, both 16-bit types with 16-bit and f32
// outputs, both weight layouts, the narrower tiles bn may ask for, three CTAs (each takes many tiles
// in a row), a group offset. Three runs each, bitwise the same; every case planned with the 192-row
// tile. `small`: one shape, two patterns and the 64-row steps, bf16, one CTA.
void check_three_consumers(bool small) {
  const std::vector<Shape> shapes = small ? std::vector<Shape>{{700, 128, 264, 4}}
                                          : std::vector<Shape>{{1000, 64, 320, 4}, {777, 136, 192, 3},
                                                               {640, 192, 200, 5}, {300, 128, 520, 8}};
  const std::vector<GroupPattern> patterns = epilogue_patterns(small);
  workloads::SplitMix64 rng(151);
  std::uint64_t seed = 33000;
  int cases = 0, plans = 0;
  const std::vector<const char*> specs =
      small ? std::vector<const char*>{"bm=192"}
            : std::vector<const char*>{"bm=192", "bm=192,bn=128", "bm=192,bn=64", "bm=192,ctas=3"};
  auto check = [&](verify::Case c, const std::string& what) {
    c.description += " " + what;
    ++cases;
    plans += expect_cuda_pass(c, seed++, false, /*repeats=*/3).find(" 192x") != std::string::npos;
  };
  for (const char* spec : specs) {
    ScopedVariant three(spec);
    for (DType dt : {DType::kBF16, DType::kF16}) {
      if (small && dt == DType::kF16) continue;
      for (DType out : {dt, DType::kF32}) {
        if (small && out == DType::kF32) continue;
        for (const Shape& sh : shapes) {
          for (GroupPattern pat : patterns)
            check(mode1_case(sh, verify::make_group_sizes(pat, sh.g, sh.m, rng), dt, out, false),
                  std::string(spec) + " " + verify::group_pattern_name(pat));
          check(mode1_case(sh, verify::make_group_sizes(GroupPattern::kRandom, sh.g, sh.m, rng), dt, out, true),
                std::string(spec) + " weights [G, N, K]");
        }
      }
    }
    // a group's last tile with rows for one, two and three warpgroups, and groups of 192 rows
    // and a row past them
    const Shape steps = {960, 128, 264, 6};
    for (const std::vector<std::int64_t>& gs : std::vector<std::vector<std::int64_t>>{
             {1, 64, 65, 128, 129, 191}, {192, 193, 0, 383, 192, 0}, {0, 0, 960, 0, 0, 0}})
      for (bool nk : {false, true}) check(mode1_case(steps, gs, DType::kBF16, DType::kBF16, nk), std::string(spec) + " rows by steps");
    if (small) continue;
    check(mode1_offset_case(), std::string(spec) + " group offset");
  }
  EXPECT_EQ(plans, cases) << "a case was not planned with the 192-row tile";
}

TEST(CudaBackend, HopperThreeConsumersSmall) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "the 192-row tile is the Hopper family's";
  check_three_consumers(true);
}

TEST(CudaBackend, HopperThreeConsumers) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "the 192-row tile is the Hopper family's";
  check_three_consumers(false);
}

// The weight-gradient form of the Hopper family (mode 2: lhs [k, m], rhs [k, n], out [g, m, n]),
// where group boundaries fall inside k tiles: odd sizes, empty groups (zero blocks), one group
// holding every row, a tail no group covers, every output dtype, a group offset. On Hopper every
// case must really be planned as wgmma.
// `plan_says`: what every plan with a 16-bit output must contain on Hopper, `f32_says` with an
// f32 output.
void check_weight_gradients(const char* plan_says, int repeats, const char* f32_says = "wgmma") {
  const bool hopper = device_is_hopper();
  const Shape shapes[] = {{256, 1000, 320, 4}, {136, 777, 264, 5}, {64, 300, 512, 3}, {200, 500, 136, 3}};
  workloads::SplitMix64 rng(29);
  std::uint64_t seed = 7000;
  int cases = 0, expected_plans = 0;
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (DType out : {dt, DType::kF32}) {
      for (const Shape& sh : shapes) {
        for (GroupPattern pat : kPatterns) {
          auto gs = verify::make_group_sizes(pat, sh.g, sh.k, rng);
          auto made = verify::shaped_case(2, sh.m, sh.k, sh.n, gs, dt, out);
          ASSERT_TRUE(made.ok()) << made.status().message();
          verify::Case c = *made;
          c.description += std::string(" ") + verify::group_pattern_name(pat);
          ++cases;
          const std::string plan = expect_cuda_pass(c, seed++, false, repeats);
          expected_plans += plan.find(out == DType::kF32 ? f32_says : plan_says) != std::string::npos;
        }
      }
    }
  }
  const std::string plan = expect_cuda_pass(mode2_offset_case(), seed++, false, repeats);
  if (hopper) {
    EXPECT_EQ(expected_plans, cases) << "a weight-gradient case was not planned as " << plan_says;
    EXPECT_NE(plan.find(plan_says), std::string::npos) << plan;
  }
}

TEST(CudaBackend, HopperWeightGradientPatternsAndOffset) {
  REQUIRE_GPU();
  check_weight_gradients("wgmma", 1);
}

// The same with the TMA-store epilogue (RAGDOT_CUDA_VARIANT=epilogue=tma, 16-bit outputs; f32
// outputs keep the direct one): the staging area reused across parts and tiles, partial tiles at
// m and n clipped by the tensor map, empty groups' zero blocks; three runs each, bitwise the same.
TEST(CudaBackend, HopperWeightGradientTmaStore) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "the TMA-store epilogue is the Hopper family's";
  ScopedVariant tma("epilogue=tma");
  check_weight_gradients("tmastore", 3);
}

// Small TMA-store cases (partial tiles, an empty group, a last tile with one box of columns) at
// every tile width, 64 to 256 (an odd number of boxes per tile alternates the buffers across
// tiles), for compute-sanitizer too (scripts/gpu_check.sh, once the test above passed).
TEST(CudaBackend, HopperWeightGradientTmaStoreSmall) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "the TMA-store epilogue is the Hopper family's";
  std::uint64_t seed = 7700;
  for (const char* spec :
       {"epilogue=tma", "epilogue=tma,bn=64", "epilogue=tma,bn=192", "epilogue=tma,buffers=3", "epilogue=tma,buffers=4"}) {
    ScopedVariant tma(spec);
    for (const verify::Case& c : {shaped(2, 200, 300, 264, {100, 0, 77, 123}, DType::kBF16, DType::kBF16),
                                  shaped(2, 72, 400, 136, {130, 0, 61, 209}, DType::kF16, DType::kF16)}) {
      const std::string plan = expect_cuda_pass(c, seed++, false, /*repeats=*/3);
      EXPECT_NE(plan.find("tmastore"), std::string::npos) << spec << " " << c.description << ": " << plan;
    }
  }
}

// Weight-gradient strips (RAGDOT_CUDA_VARIANT=strips=on, kernels/ragdot/strips.h): runs of a
// column tile's output tiles on one CTA, B kept in shared memory for the groups whose k steps fit
// in its slots (4 at bn 256: up to 256 rows) and streamed for the others. The cases: groups of 1,
// 64, 255 and 256 rows (resident, their last k step partial or whole) beside an empty one and one
// of 257 rows (streamed); strips of several tiles (18 m tiles: two strips of 9) whose last tile
// and last column tile are partial, and one strip of the most tiles (16); a tail of rows no group
// covers; 300 small groups (a unit's group found among many; 5 A stages beside their table); an
// f32 output; groups of 500 and 520 rows (resident only at bn 128's 8 slots); a group offset. Each
// case under each spec, three runs, bitwise the same, every one planned in strips. `small`: three
// cases, the whole grid and 3 CTAs with the shallowest ring (for compute-sanitizer).
// `turns`: the same cases with the consumer warpgroups taking turns (pingpong=on): groups whose k
// steps fit the A ring with B resident take turns, the others (streamed) run in step, side by side.
// `tma_store`: the same cases with the TMA-store epilogue (epilogue=tma: its staging area after
// B's slots, two or three A tiles; 16-bit outputs, an f32 output keeps the register stores), at
// every tile width and in turns too, and with three buffers (buffers=3, two A tiles; refused beside
// the 300 groups' table, which leaves room for one): boxes clipped at m and n, empty groups' zero
// blocks, the buffers taken in turn across tiles and units.
void check_strips(bool small, bool turns = false, bool tma_store = false) {
  workloads::SplitMix64 rng(79);
  std::vector<std::int64_t> many(300);
  for (auto& g : many) g = std::int64_t(rng.next() % 20);
  std::int64_t many_rows = 0;
  for (auto g : many) many_rows += g;
  std::vector<verify::Case> cases = {
      shaped(2, 200, 600, 264, {64, 0, 1, 255, 256, 24}, DType::kBF16, DType::kBF16),
      shaped(2, 2048, 300, 72, {128, 0, 172}, DType::kBF16, DType::kBF16),  // strips of all 16 m tiles
      shaped(2, 136, many_rows + 7, 136, many, DType::kBF16, DType::kBF16),
  };
  if (!small) {
    cases.push_back(shaped(2, 2184, 700, 136, {100, 257, 0, 130, 70}, DType::kBF16, DType::kBF16));
    cases.push_back(shaped(2, 136, 640, 264, {300, 43, 0, 200}, DType::kF16, DType::kF32));
    cases.push_back(shaped(2, 264, 1100, 200, {500, 13, 0, 520}, DType::kBF16, DType::kBF16));
  }
  // (B's slots wrap around across units on a few CTAs, with each ring depth and slot count: 4 at
  // bn 256, 8 at 128, 5 at 192, 16 at 64)
  const std::vector<const char*> specs =
      tma_store ? (small ? std::vector<const char*>{"strips=on,epilogue=tma", "strips=on,epilogue=tma,pingpong=on,ctas=3",
                                                    "strips=on,epilogue=tma,buffers=3,ctas=3"}
                         : std::vector<const char*>{"strips=on,epilogue=tma,ctas=3", "strips=on,epilogue=tma,ctas=1",
                                                    "strips=on,epilogue=tma,bn=128,ctas=3",
                                                    "strips=on,epilogue=tma,bn=192,ctas=2", "strips=on,epilogue=tma,bn=64",
                                                    "strips=on,epilogue=tma,pingpong=on,ctas=2"})
      : turns ? (small ? std::vector<const char*>{"strips=on,pingpong=on", "strips=on,pingpong=on,stages=2,ctas=3"}
                     : std::vector<const char*>{"strips=on,pingpong=on,ctas=3", "strips=on,pingpong=on,ctas=1",
                                                "strips=on,pingpong=on,stages=3,ctas=2"})
      : small ? std::vector<const char*>{"strips=on", "strips=on,stages=2,ctas=3"}
              : std::vector<const char*>{"strips=on",         "strips=on,ctas=3",        "strips=on,stages=2,ctas=3",
                                         "strips=on,bn=128,ctas=3", "strips=on,bn=192,ctas=2", "strips=on,bn=64"};
  std::uint64_t seed = (small ? 7900 : 7950) + (turns ? 500 : 0) + (tma_store ? 1000 : 0);
  int planned = 0, runs = 0;
  for (const char* spec : specs) {
    ScopedVariant strips(spec);
    const bool in_turns = std::strstr(spec, "pingpong=on") != nullptr;  // (every spec of `turns` has it)
    // (an f32 output keeps the register epilogue)
    auto as_asked = [&](const std::string& plan) {
      return plan.find(in_turns ? "strips pingpong" : "strips") != std::string::npos &&
             (!tma_store || plan.find("->f32") != std::string::npos || plan.find("tmastore") != std::string::npos);
    };
    for (verify::Case c : cases) {
      c.description += std::string(" ") + spec;
      if (std::strstr(spec, "buffers=3") && c.spec.group_sizes.shape.back() > 256) {
        // three buffers leave no room for two A tiles beside the table of 300 groups: refused, saying so
        auto op = RaggedDot::create(c.spec);
        ASSERT_TRUE(op.ok()) << op.status().to_string();
        PlanOptions po;
        po.backend = "cuda";
        const auto refused = make_plan(*op, po);
        ASSERT_FALSE(refused.ok()) << c.description << ": " << refused->to_string();
        EXPECT_NE(refused.status().message().find("no room"), std::string::npos) << refused.status().to_string();
        continue;
      }
      const std::string plan = expect_cuda_pass(c, seed++, false, /*repeats=*/3);
      planned += as_asked(plan);
      ++runs;
    }
    const std::string plan = expect_cuda_pass(mode2_offset_case(), seed++, false, /*repeats=*/3);
    planned += as_asked(plan);
    ++runs;
  }
  EXPECT_EQ(planned, runs) << "a case was not planned in strips (with turns and the TMA-store epilogue where asked)";
}

// (the small cases first: scripts/gpu_check.sh runs the others only if they pass)
TEST(CudaBackend, HopperWeightGradientStripsSmall) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "weight-gradient strips are the Hopper family's";
  check_strips(true);
}

// Strips on the cases above under every spec, then on the whole weight-gradient matrix (groups
// from empty to all rows, so resident and streamed ones side by side, every output dtype, a group
// offset), three runs each, bitwise the same, every case planned in strips.
TEST(CudaBackend, HopperWeightGradientStrips) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "weight-gradient strips are the Hopper family's";
  check_strips(false);
  ScopedVariant strips("strips=on");
  check_weight_gradients("strips", 3, "strips");
}

// Strips with the TMA-store epilogue (epilogue=tma, opt-in): the small cases first.
TEST(CudaBackend, HopperWeightGradientStripsTmaStoreSmall) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "weight-gradient strips are the Hopper family's";
  check_strips(true, /*turns=*/false, /*tma_store=*/true);
}

TEST(CudaBackend, HopperWeightGradientStripsTmaStore) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "weight-gradient strips are the Hopper family's";
  check_strips(false, /*turns=*/false, /*tma_store=*/true);
  ScopedVariant stored("strips=on,epilogue=tma");
  check_weight_gradients("tmastore strips", 3, "strips");
}

// The same with the consumer warpgroups taking turns (pingpong=on, opt-in): the small cases first.
TEST(CudaBackend, HopperWeightGradientTurnsSmall) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "weight-gradient strips are the Hopper family's";
  check_strips(true, /*turns=*/true);
}

TEST(CudaBackend, HopperWeightGradientTurns) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "weight-gradient strips are the Hopper family's";
  check_strips(false, /*turns=*/true);
  ScopedVariant turns("strips=on,pingpong=on");
  check_weight_gradients("strips pingpong", 3, "strips pingpong");
}

// PlanningEffort::kMeasure: the candidates are timed on the device and the fastest plans the op;
// the choice is kept, so the next plan of the same op (and sizes) reads it back; every measured
// plan matches the oracle on every group-size pattern. The sizes to measure with are drawn afresh
// each run, so the first plan really times its candidates (a new tuning key); gathered lhs rows
// in both modes too (the trial's index has one entry per gathered row: m, or k in mode 2). An
// override is not measured against others.
TEST(CudaBackend, MeasuredPlansMatchTheOracleAndAreKept) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "measured plans have alternates on the Hopper family only";
  struct MeasuredShape {
    int mode;
    Shape shape;
    const char* what;
    bool gathered = false;  // lhs rows through an index (PlanOptions::lhs_gather_rows)
  };
  // (k short where m and n are large: the float64 oracle's time grows with m k n, and on an H200
  // k = 1024 made this test run past five minutes, nearly all of it in the oracle)
  const MeasuredShape shapes[] = {{1, {256, 512, 512, 64}, "decode-sized groups"},
                                  {1, {2048, 256, 1024, 8}, "prefill-sized groups"},
                                  {2, {512, 1024, 512, 8}, "weight gradient"},
                                  {1, {2048, 256, 1536, 8}, "gathered rows", true},
                                  {2, {512, 1024, 512, 8}, "weight gradient on gathered rows", true}};
  workloads::SplitMix64 rng(std::uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::uint64_t seed = 9100;
  for (const MeasuredShape& ms : shapes) {
    const Shape& sh = ms.shape;
    const std::int64_t extent = ms.mode == 1 ? sh.m : sh.k;
    PlanOptions po;
    po.backend = "cuda";
    po.effort = PlanningEffort::kMeasure;
    po.measure_group_sizes = verify::make_group_sizes(GroupPattern::kRandom, sh.g, extent, rng);
    const auto t0 = std::chrono::steady_clock::now();
    // (gathered: rows from a table of a quarter as many, each read about four times)
    const auto with_rows = [&](verify::Case c) {
      if (!ms.gathered) return c;
      const std::int64_t rows = ms.mode == 1 ? sh.m : sh.k;
      c.lhs_table_rows = rows / 4;
      for (std::int64_t i = 0; i < rows; ++i)
        c.lhs_rows.push_back(std::int32_t(rng.next() % std::uint64_t(c.lhs_table_rows)));
      return c;
    };
    verify::Case first = with_rows(shaped(ms.mode, sh.m, sh.k, sh.n,
                                          verify::make_group_sizes(GroupPattern::kUniform, sh.g, extent, rng),
                                          DType::kBF16, DType::kBF16));
    auto r = verify::check_case(first, po, seed++, *gpu());
    std::fprintf(stderr, "  [%s %.2fs] measured %s | %s\n", r.passed ? "ok" : "FAIL",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), ms.what, r.plan.c_str());
    EXPECT_TRUE(r.passed) << ms.what << "\n  " << r.plan << "\n  " << r.message;
    EXPECT_NE(r.plan.find(" measured="), std::string::npos) << r.plan;
    EXPECT_EQ(r.plan.find(",cached)"), std::string::npos) << "sizes drawn afresh, yet found in the cache: " << r.plan;
    // every candidate timed and agreeing with the planner's choice (none failed or was rejected),
    // so that the choice was a real one
    EXPECT_EQ(r.plan.find("dropped"), std::string::npos) << r.plan;
    EXPECT_EQ(r.plan.find("not measured"), std::string::npos) << r.plan;
    EXPECT_EQ(r.plan.find("no alternates"), std::string::npos) << r.plan;
    for (GroupPattern pat : kPatterns) {
      verify::Case c = with_rows(shaped(ms.mode, sh.m, sh.k, sh.n, verify::make_group_sizes(pat, sh.g, extent, rng),
                                        DType::kBF16, DType::kBF16));
      c.description += std::string(" measured ") + verify::group_pattern_name(pat);
      auto again = verify::check_case(c, po, seed++, *gpu());
      EXPECT_TRUE(again.passed) << c.description << "\n  " << again.plan << "\n  " << again.message;
      EXPECT_NE(again.plan.find(",cached)"), std::string::npos) << "not read back: " << again.plan;
    }
  }
  // an override names its variant: not measured
  verify::CheckResult r;
  {
    ScopedVariant override("bn=128");
    PlanOptions po;
    po.backend = "cuda";
    po.effort = PlanningEffort::kMeasure;
    r = verify::check_case(shaped(1, 512, 256, 512, {100, 0, 300, 50}, DType::kBF16, DType::kBF16), po, seed++, *gpu());
  }
  EXPECT_TRUE(r.passed) << r.message;
  EXPECT_EQ(r.plan.find("measured="), std::string::npos) << r.plan;
}

TEST(CudaBackend, BatchModeAndBatchDims) {
  REQUIRE_GPU();
  std::uint64_t seed = 100;
  for (DType dt : {DType::kBF16, DType::kF32}) {
    auto c = verify::shaped_case(3, 136, 72, 48, {1, 1, 1}, dt);
    ASSERT_TRUE(c.ok()) << c.status().message();
    expect_cuda_pass(*c, seed++);
    // batched mode 1 with per-batch group sizes [b, g]
    workloads::SplitMix64 rng(5);
    verify::Case b;
    b.spec.lhs = {dt, {3, 40, 16}};
    b.spec.rhs = {dt, {3, 4, 16, 24}};
    b.spec.group_sizes = {DType::kI64, {3, 4}};
    b.spec.dims.dot = {{2}, {2}, {0}, {0}};
    b.spec.dims.lhs_ragged = {1};
    b.spec.dims.rhs_group = {1};
    for (int r = 0; r < 3; ++r) {
      auto row = verify::make_group_sizes(GroupPattern::kPartialSum, 4, 40, rng);
      b.group_sizes.insert(b.group_sizes.end(), row.begin(), row.end());
    }
    b.description = "batched with [b, g] group sizes";
    expect_cuda_pass(b, seed++);
  }
}

TEST(CudaBackend, RandomGeneralCases) {
  REQUIRE_GPU();
  int ran = 0, copied = 0;
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    verify::CaseOptions o;
    o.max_dim = 48;
    auto c = verify::random_case(seed, o);
    PlanOptions po;
    po.backend = "cuda";
    auto r = verify::check_case(c, po, seed, *gpu());
    // group sizes along a contracted dim (mode 2 with reduce dims) stay with the CPU backends
    if (r.message.rfind("unsupported", 0) == 0) continue;
    ++ran;
    if (r.plan.find("-copy") != std::string::npos) ++copied;
    EXPECT_TRUE(r.passed) << "seed " << seed << ": " << c.description << "\n  " << r.plan << "\n  " << r.message;
  }
  EXPECT_GE(ran, 280);     // of 300: 8 have reduce dims
  EXPECT_GE(copied, 120);  // about half need an operand copied by the relayout kernel first
}

TEST(CudaBackend, AutomaticChoiceIsCudaForDeviceMemory) {
  REQUIRE_GPU();
  auto c = verify::shaped_case(1, 300, 128, 256, {100, 0, 200}, DType::kBF16);
  ASSERT_TRUE(c.ok());
  PlanOptions po;
  po.memory_space = MemorySpace::kDevice;
  auto r = verify::check_case(*c, po, 7, *gpu());
  EXPECT_TRUE(r.passed) << r.message;
  EXPECT_NE(r.plan.find("cuda"), std::string::npos) << r.plan;
}

// A device buffer freed at scope exit.
struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(std::size_t bytes) { p = gpu()->alloc(bytes).value(); }
  ~DeviceBuffer() { gpu()->free(p); }
};

struct GraphFixture {
  std::int64_t m = 1200, k = 256, n = 320, g = 6;  // declared before op: it is built from them
  RaggedDot op;
  std::vector<std::uint16_t> lhs, rhs;
  static RaggedDot make_op(std::int64_t m, std::int64_t k, std::int64_t n, std::int64_t g) {
    RaggedDotSpec s;
    s.lhs = {DType::kBF16, {m, k}};
    s.rhs = {DType::kBF16, {g, k, n}};
    s.group_sizes = {DType::kI32, {g}};
    s.dims = RaggedDotDimensionNumbers::ragged_dot();
    return RaggedDot::create(s).value();
  }
  GraphFixture() : op(make_op(m, k, n, g)) { fill(); }
  GraphFixture(std::int64_t m_, std::int64_t k_, std::int64_t n_, std::int64_t g_)
      : m(m_), k(k_), n(n_), g(g_), op(make_op(m, k, n, g)) {
    fill();
  }
  void fill() {
    lhs.resize(std::size_t(m * k));
    rhs.resize(std::size_t(g * k * n));
    verify::fill_random(lhs.data(), DType::kBF16, m * k, 11);
    verify::fill_random(rhs.data(), DType::kBF16, g * k * n, 12);
  }
  // A cuda plan of the fixture's op.
  Result<Plan> cuda_plan(bool checked = false) const {
    PlanOptions po;
    po.backend = "cuda";
    po.checked = checked;
    return make_plan(op, po);
  }
  // The oracle's output for these group sizes, as floats.
  std::vector<float> expected(const std::vector<std::int32_t>& gs) const {
    PlanOptions po;
    po.backend = "cpu_ref";
    auto plan = make_plan(op, po).value();
    std::vector<std::uint16_t> out(std::size_t(m * n));
    std::vector<unsigned char> ws(plan.workspace_bytes() + 1);
    ExecuteArgs a;
    a.lhs = {lhs.data(), lhs.size() * 2, MemorySpace::kHost};
    a.rhs = {rhs.data(), rhs.size() * 2, MemorySpace::kHost};
    a.group_sizes = {gs.data(), gs.size() * 4, MemorySpace::kHost};
    a.out = {out.data(), out.size() * 2, MemorySpace::kHost};
    a.workspace = {ws.data(), plan.workspace_bytes(), MemorySpace::kHost};
    EXPECT_TRUE(plan.execute(a).is_ok());
    std::vector<float> f(out.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      const std::uint32_t bits = std::uint32_t(out[i]) << 16;
      std::memcpy(&f[i], &bits, 4);
    }
    return f;
  }
};

double rel_error(const std::vector<std::uint16_t>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const std::uint32_t bits = std::uint32_t(got[i]) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    if (std::isnan(v)) return INFINITY;
    num += (double(v) - want[i]) * (double(v) - want[i]);
    den += double(want[i]) * want[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// The fixture's operands on the GPU, and the execute arguments that name them.
struct FixtureOnDevice {
  const GraphFixture& f;
  // Executes `plan` on these buffers and returns the output's relative error against the oracle
  // for `oracle_sizes` (the sizes the device should have used).
  Result<double> run_error(const Plan& plan, const ExecuteArgs& a, const std::vector<std::int32_t>& oracle_sizes) const {
    RAGDOT_RETURN_IF_ERROR(plan.execute(a));
    RAGDOT_RETURN_IF_ERROR(gpu()->synchronize());
    std::vector<std::uint16_t> out(std::size_t(f.m * f.n));
    RAGDOT_RETURN_IF_ERROR(gpu()->download(out.data(), dout.p, out.size() * 2));
    return rel_error(out, f.expected(oracle_sizes));
  }
  static constexpr std::size_t kWorkspaceBytes = 4096;  // the fixture's plans need 512 bytes at most
  std::size_t workspace_bytes;
  DeviceBuffer dl, dr, dg, dout, dws;
  explicit FixtureOnDevice(const GraphFixture& fixture, std::size_t workspace = kWorkspaceBytes)
      : f(fixture), workspace_bytes(workspace), dl(f.lhs.size() * 2), dr(f.rhs.size() * 2), dg(std::size_t(f.g) * 4),
        dout(std::size_t(f.m * f.n) * 2), dws(workspace) {}
  Status upload_inputs() const {
    Status st = gpu()->upload(dl.p, f.lhs.data(), f.lhs.size() * 2);
    return st.is_ok() ? gpu()->upload(dr.p, f.rhs.data(), f.rhs.size() * 2) : st;
  }
  ExecuteArgs args(void* stream) const {
    ExecuteArgs a;
    a.lhs = {dl.p, f.lhs.size() * 2, MemorySpace::kDevice};
    a.rhs = {dr.p, f.rhs.size() * 2, MemorySpace::kDevice};
    a.group_sizes = {dg.p, std::size_t(f.g) * 4, MemorySpace::kDevice};
    a.out = {dout.p, std::size_t(f.m * f.n) * 2, MemorySpace::kDevice};
    a.workspace = {dws.p, workspace_bytes, MemorySpace::kDevice};
    a.stream = stream;
    return a;
  }
};

TEST(CudaBackend, GraphCaptureReplaysWithNewGroupSizes) {
  REQUIRE_GPU();
  GraphFixture f;
  auto plan = f.cuda_plan();
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_TRUE(plan->graph_safe());
  ASSERT_FALSE(plan->needs_host_sync());
  FixtureOnDevice dev_ops(f);
  ASSERT_TRUE(dev_ops.upload_inputs().is_ok());
  std::vector<std::int32_t> gs0 = {200, 0, 500, 1, 499, 0};
  ASSERT_TRUE(gpu()->upload(dev_ops.dg.p, gs0.data(), gs0.size() * 4).is_ok());

  const cuda::DriverApi* d = cuda::driver();
  // graph calls need a current context; the library's calls push and pop their own
  auto dev = cuda::device(0);
  ASSERT_TRUE(dev.ok());
  cuda::ScopedContext scope((*dev)->context);
  ASSERT_TRUE(scope.status().is_ok());
  CUstream stream = static_cast<CUstream>(gpu()->stream());
  const ExecuteArgs a = dev_ops.args(stream);
  ASSERT_EQ(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  const Status st = plan->execute(a);
  CUgraph graph = nullptr;
  ASSERT_EQ(d->cuStreamEndCapture(stream, &graph), CUDA_SUCCESS);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  CUgraphExec exec = nullptr;
  ASSERT_EQ(d->cuGraphInstantiate(&exec, graph, 0), CUDA_SUCCESS);

  const std::vector<std::vector<std::int32_t>> sizes = {
      gs0, {1200, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0}, {7, 13, 101, 3, 600, 11}, {0, 0, 0, 0, 0, 1200}};
  std::vector<std::uint16_t> out(std::size_t(f.m * f.n));
  const std::vector<std::uint16_t> poison(out.size(), 0x7fc0);  // bf16 NaN
  for (const auto& gs : sizes) {
    ASSERT_TRUE(gpu()->upload(dev_ops.dg.p, gs.data(), gs.size() * 4).is_ok());
    ASSERT_TRUE(gpu()->upload(dev_ops.dout.p, poison.data(), poison.size() * 2).is_ok());
    ASSERT_EQ(d->cuGraphLaunch(exec, stream), CUDA_SUCCESS);
    ASSERT_TRUE(gpu()->synchronize().is_ok());
    ASSERT_TRUE(gpu()->download(out.data(), dev_ops.dout.p, out.size() * 2).is_ok());
    const double err = rel_error(out, f.expected(gs));
    EXPECT_LT(err, 6e-3) << "group sizes " << gs[0] << "," << gs[1] << ",...";
  }
  // replays of the same group sizes give the same bytes
  std::vector<std::uint16_t> first;
  for (int replay = 0; replay < 3; ++replay) {
    ASSERT_TRUE(gpu()->upload(dev_ops.dg.p, sizes[3].data(), sizes[3].size() * 4).is_ok());
    ASSERT_TRUE(gpu()->upload(dev_ops.dout.p, poison.data(), poison.size() * 2).is_ok());
    ASSERT_EQ(d->cuGraphLaunch(exec, stream), CUDA_SUCCESS);
    ASSERT_TRUE(gpu()->synchronize().is_ok());
    ASSERT_TRUE(gpu()->download(out.data(), dev_ops.dout.p, out.size() * 2).is_ok());
    if (replay == 0) first = out;
    EXPECT_TRUE(out == first) << "graph replay " << replay << " differs from the first (not deterministic)";
  }
  d->cuGraphExecDestroy(exec);
  d->cuGraphDestroy(graph);
}

// Split tiles, observed: after a run of a split-tail plan the workspace's counters tell how the
// kernel cut its tiles. The tile counter stands at the units handed out plus one draw past the
// end per CTA; each split tile's two counters at its piece count for a consumer warpgroup with
// rows there and 0 for one without; every other counter at 0. Both must be what split.h gives for
// these group sizes (tiles in the scheduler's order: group by group, m tiles of one n tile
// adjacent) and the plan's grid, on the whole grid and on grids of 3, 4 and 6 CTAs, and through a
// CUDA graph replayed with other group sizes (the counters are zeroed inside the graph). Outputs
// against the oracle each time.
TEST(CudaBackend, HopperSplitTailCountsItsPieces) {
  REQUIRE_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "split tiles are the Hopper family's";
  GraphFixture f(600, 1024, 264, 5);  // 16 k steps: up to four pieces
  const std::vector<std::vector<std::int32_t>> sizes = {
      {130, 0, 61, 209, 200}, {600, 0, 0, 0, 0}, {7, 13, 101, 3, 470}, {64, 65, 128, 129, 1}, {0, 0, 0, 0, 0}};
  const std::int64_t bn = 256, n_tiles = (f.n + bn - 1) / bn, k_steps = f.k / 64;
  int checks = 0, split_runs = 0, after_whole_waves = 0;
  // checks the output and the counters after a run with group sizes `gs` on `grid` CTAs
  auto check_counters = [&](const FixtureOnDevice& dev, const std::vector<std::int32_t>& gs, int grid,
                            const std::string& what) {
    std::vector<std::uint16_t> out(std::size_t(f.m * f.n));
    ASSERT_TRUE(gpu()->download(out.data(), dev.dout.p, out.size() * 2).is_ok());
    EXPECT_LT(rel_error(out, f.expected(gs)), 6e-3) << what;
    std::vector<int> rows_in_tile;  // the compute tiles' rows, in the scheduler's order
    std::int64_t covered = 0;
    for (std::int32_t size : gs) {
      const std::int64_t m_tiles = (size + 127) / 128;
      for (std::int64_t t = 0; t < m_tiles * n_tiles; ++t)
        rows_in_tile.push_back(int(std::min<std::int64_t>(128, size - (t % m_tiles) * 128)));
      covered += size;
    }
    const int compute = int(rows_in_tile.size());
    const int zero_tiles = int((f.m - covered + 127) / 128 * n_tiles);
    const RagdotSplit split =
        ragdot_split_plan(compute + zero_tiles, compute, grid, int(k_steps), RAGDOT_SPLIT_MAX_PIECES);
    std::vector<std::int32_t> counters(std::size_t(ragdot_split_counters(grid)));
    ASSERT_TRUE(gpu()->download(counters.data(), dev.dws.p, counters.size() * 4).is_ok());
    EXPECT_EQ(counters[0], split.total + grid) << what << ": units handed out";
    const int tail = (split.split_end - split.first_split) / split.pieces;
    for (int i = 0; i < grid; ++i)
      for (int wg = 0; wg < 2; ++wg) {
        const bool rows = i < tail && rows_in_tile[std::size_t(split.first_split + i)] > 64 * wg;
        EXPECT_EQ(counters[std::size_t(1 + 2 * i + wg)], rows && split.pieces > 1 ? split.pieces : 0)
            << what << ": split tile " << i << " warpgroup " << wg;
      }
    ++checks;
    split_runs += split.pieces > 1;
    after_whole_waves += split.pieces > 1 && split.first_split > 0;
  };
  for (const char* spec : {"split=tail", "split=tail,ctas=3", "split=tail,ctas=4", "split=tail,ctas=6"}) {
    ScopedVariant variant(spec);
    auto plan = f.cuda_plan();
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    const std::string text = plan->to_string();
    ASSERT_NE(text.find("splittail"), std::string::npos) << text;
    std::smatch grid;
    ASSERT_TRUE(std::regex_search(text, grid, std::regex(R"(grid=(\d+)x)"))) << text;
    FixtureOnDevice dev(f, plan->workspace_bytes());
    ASSERT_TRUE(dev.upload_inputs().is_ok());
    for (const auto& gs : sizes) {
      ASSERT_TRUE(gpu()->upload(dev.dg.p, gs.data(), gs.size() * 4).is_ok());
      ASSERT_TRUE(plan->execute(dev.args(gpu()->stream())).is_ok());
      ASSERT_TRUE(gpu()->synchronize().is_ok());
      check_counters(dev, gs, std::stoi(grid[1]), std::string(spec) + " sizes " + std::to_string(gs[0]) + ",...");
    }
    if (std::string(spec) != "split=tail,ctas=4") continue;
    // the same plan captured once and replayed with each group size
    const cuda::DriverApi* d = cuda::driver();
    auto device = cuda::device(0);
    ASSERT_TRUE(device.ok());
    cuda::ScopedContext scope((*device)->context);
    ASSERT_TRUE(scope.status().is_ok());
    CUstream stream = static_cast<CUstream>(gpu()->stream());
    ASSERT_EQ(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    const Status st = plan->execute(dev.args(stream));
    CUgraph graph = nullptr;
    ASSERT_EQ(d->cuStreamEndCapture(stream, &graph), CUDA_SUCCESS);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    CUgraphExec exec = nullptr;
    ASSERT_EQ(d->cuGraphInstantiate(&exec, graph, 0), CUDA_SUCCESS);
    for (const auto& gs : sizes) {
      ASSERT_TRUE(gpu()->upload(dev.dg.p, gs.data(), gs.size() * 4).is_ok());
      ASSERT_EQ(d->cuGraphLaunch(exec, stream), CUDA_SUCCESS);
      ASSERT_TRUE(gpu()->synchronize().is_ok());
      check_counters(dev, gs, std::stoi(grid[1]), std::string("graph replay, sizes ") + std::to_string(gs[0]) + ",...");
    }
    d->cuGraphExecDestroy(exec);
    d->cuGraphDestroy(graph);
  }
  EXPECT_EQ(checks, 25);
  EXPECT_GE(split_runs, 10) << "too few runs split a tile: the test misses its point";
  EXPECT_GE(after_whole_waves, 5) << "too few runs split their last wave after whole ones";
}

TEST(CudaBackend, CheckedModeRejectsBadGroupSizesWithoutWriting) {
  REQUIRE_GPU();
  GraphFixture f;
  auto plan = f.cuda_plan(/*checked=*/true);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_TRUE(plan->needs_host_sync());
  EXPECT_FALSE(plan->graph_safe());
  FixtureOnDevice dev_ops(f);
  DeviceBuffer dws(plan->workspace_bytes());
  ASSERT_TRUE(dev_ops.upload_inputs().is_ok());
  ExecuteArgs a = dev_ops.args(gpu()->stream());
  a.workspace = {dws.p, plan->workspace_bytes(), MemorySpace::kDevice};
  std::vector<std::uint16_t> out(std::size_t(f.m * f.n));
  const std::vector<std::uint16_t> poison(out.size(), 0x7fc0);
  struct Bad {
    std::vector<std::int32_t> gs;
    const char* message;
  };
  for (const Bad& bad : {Bad{{100, -1, 0, 0, 0, 0}, "negative"}, Bad{{1000, 201, 0, 0, 0, 0}, "exceeds"}}) {
    ASSERT_TRUE(gpu()->upload(dev_ops.dg.p, bad.gs.data(), bad.gs.size() * 4).is_ok());
    ASSERT_TRUE(gpu()->upload(dev_ops.dout.p, poison.data(), poison.size() * 2).is_ok());
    const Status st = plan->execute(a);
    EXPECT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find(bad.message), std::string::npos) << st.to_string();
    ASSERT_TRUE(gpu()->download(out.data(), dev_ops.dout.p, out.size() * 2).is_ok());
    EXPECT_EQ(out, poison) << "the output was written although the group sizes were rejected";
  }
  // good sizes still run
  std::vector<std::int32_t> good = {100, 100, 100, 100, 100, 700};
  ASSERT_TRUE(gpu()->upload(dev_ops.dg.p, good.data(), good.size() * 4).is_ok());
  const auto err = dev_ops.run_error(*plan, a, good);
  ASSERT_TRUE(err.ok()) << err.status().to_string();
  EXPECT_LT(*err, 6e-3);
}

TEST(CudaBackend, UncheckedModeClampsBadGroupSizes) {
  REQUIRE_GPU();
  GraphFixture f;
  auto plan = f.cuda_plan();
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  FixtureOnDevice dev_ops(f);
  ASSERT_TRUE(dev_ops.upload_inputs().is_ok());
  const std::vector<std::int32_t> bad = {300, -50, 400, 900, 5, 5};  // negative, then past the extent
  const std::vector<std::int32_t> clamped = {300, 0, 400, 500, 0, 0};
  ASSERT_TRUE(gpu()->upload(dev_ops.dg.p, bad.data(), bad.size() * 4).is_ok());
  const auto err = dev_ops.run_error(*plan, dev_ops.args(gpu()->stream()), clamped);
  ASSERT_TRUE(err.ok()) << err.status().to_string();
  EXPECT_LT(*err, 6e-3);
}

// 64-bit sizes whose sum passes 2^63: the device's prefix sum must cap them at the ragged extent,
// not wrap around to negative starts (which would send the zero segments' tiles before `out`).
// The output sits between two poisoned guard regions that must come back untouched.
TEST(CudaBackend, UncheckedModeCapsSixtyFourBitSizesThatWouldOverflow) {
  REQUIRE_GPU();
  GraphFixture f;
  RaggedDotSpec spec;
  spec.lhs = {DType::kBF16, {f.m, f.k}};
  spec.rhs = {DType::kBF16, {f.g, f.k, f.n}};
  spec.group_sizes = {DType::kI64, {f.g}};
  spec.dims = RaggedDotDimensionNumbers::ragged_dot();
  auto op = RaggedDot::create(spec);
  ASSERT_TRUE(op.ok()) << op.status().to_string();
  // the cuda backend, and the GPU padded baseline with a capacity (its device-side path)
  PlanOptions cuda_options, padded_options;
  cuda_options.backend = "cuda";
  padded_options.backend = "padded";
  padded_options.memory_space = MemorySpace::kDevice;
  padded_options.padded_capacity_factor = 8.0;  // capacity 1600 rows: nothing dropped
  for (const PlanOptions& po : {cuda_options, padded_options}) {
    SCOPED_TRACE(po.backend);
    auto plan = make_plan(*op, po);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    ASSERT_FALSE(plan->needs_host_sync()) << plan->variant();
    FixtureOnDevice dev_ops(f, std::max<std::size_t>(plan->workspace_bytes(), 16));
    ASSERT_TRUE(dev_ops.upload_inputs().is_ok());
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    const std::vector<std::vector<std::int64_t>> bad = {
        {300, kMax, kMax, 5, -3, 7},       // group 1 takes the rest; the sum of all wraps to negative
        {kMax, kMax, kMax, kMax, kMax, kMax},
        {-kMax, kMax, 1, kMax, -1, 2},     // a wrap-around that lands near zero
    };
    const std::vector<std::vector<std::int32_t>> clamped = {
        {300, 900, 0, 0, 0, 0}, {1200, 0, 0, 0, 0, 0}, {0, 1200, 0, 0, 0, 0}};
    const std::size_t out_elems = std::size_t(f.m * f.n), guard = 8192;  // elements each side
    DeviceBuffer dg64(std::size_t(f.g) * 8), dbig((out_elems + 2 * guard) * 2);
    for (std::size_t c = 0; c < bad.size(); ++c) {
      SCOPED_TRACE("case " + std::to_string(c));
      std::vector<std::uint16_t> host(out_elems + 2 * guard, 0x7fc1);  // a NaN
      ASSERT_TRUE(gpu()->upload(dbig.p, host.data(), host.size() * 2).is_ok());
      ASSERT_TRUE(gpu()->upload(dg64.p, bad[c].data(), bad[c].size() * 8).is_ok());
      ExecuteArgs a = dev_ops.args(gpu()->stream());
      a.group_sizes = {dg64.p, std::size_t(f.g) * 8, MemorySpace::kDevice};
      a.out = {static_cast<char*>(dbig.p) + guard * 2, out_elems * 2, MemorySpace::kDevice};
      ASSERT_TRUE(plan->execute(a).is_ok());
      ASSERT_TRUE(gpu()->synchronize().is_ok());
      ASSERT_TRUE(gpu()->download(host.data(), dbig.p, host.size() * 2).is_ok());
      std::size_t touched = 0;
      for (std::size_t i = 0; i < guard; ++i) touched += (host[i] != 0x7fc1) + (host[guard + out_elems + i] != 0x7fc1);
      EXPECT_EQ(touched, 0u) << "elements written outside the output";
      const std::vector<std::uint16_t> out(host.begin() + guard, host.begin() + guard + out_elems);
      EXPECT_LT(rel_error(out, f.expected(clamped[c])), 6e-3);
    }
  }
}

// Bad device buffers get a clear error before anything is launched: the poisoned output comes
// back untouched.
TEST(CudaBackend, RejectsNullMisalignedAndShortDeviceBuffers) {
  REQUIRE_GPU();
  GraphFixture f;
  auto plan = f.cuda_plan();
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  FixtureOnDevice dev_ops(f);
  ASSERT_TRUE(dev_ops.upload_inputs().is_ok());
  const std::vector<std::int32_t> gs = {200, 0, 500, 1, 499, 0};
  ASSERT_TRUE(gpu()->upload(dev_ops.dg.p, gs.data(), gs.size() * 4).is_ok());
  const std::size_t out_elems = std::size_t(f.m * f.n);
  const std::vector<std::uint16_t> poison(out_elems, 0x7fc1);
  ASSERT_TRUE(gpu()->upload(dev_ops.dout.p, poison.data(), out_elems * 2).is_ok());
  const ExecuteArgs good = dev_ops.args(gpu()->stream());
  const auto shifted = [](const void* p, std::size_t by) { return static_cast<const char*>(p) + by; };
  struct Bad {
    const char* what;
    ExecuteArgs args;
    const char* message;
  };
  std::vector<Bad> bad;
  for (int i = 0; i < 9; ++i) {
    ExecuteArgs a = good;
    switch (i) {
      case 0: a.lhs.data = nullptr; bad.push_back({"null lhs", a, "lhs is null"}); break;
      case 1: a.rhs.data = nullptr; bad.push_back({"null rhs", a, "rhs is null"}); break;
      case 2: a.group_sizes.data = nullptr; bad.push_back({"null group sizes", a, "group_sizes is null"}); break;
      case 3: a.out.data = nullptr; bad.push_back({"null out", a, "out is null"}); break;
      case 4:  // 2 bytes off: a bf16 element's alignment, not the 16 bytes TMA and vector loads need
        a.lhs.data = shifted(a.lhs.data, 2);  // the size it claims is right: only the alignment is wrong
        bad.push_back({"misaligned lhs", a, "lhs is not aligned to 16 bytes"});
        break;
      case 5:
        a.rhs.data = shifted(a.rhs.data, 8);
        bad.push_back({"misaligned rhs", a, "rhs is not aligned to 16 bytes"});
        break;
      case 6:
        a.out.data = static_cast<char*>(dev_ops.dout.p) + 2, a.out.bytes -= 2;
        bad.push_back({"misaligned and short out", a, "out has"});
        break;
      case 7: a.lhs.bytes -= 2; bad.push_back({"short lhs", a, "lhs has"}); break;
      case 8: a.group_sizes.bytes = 4; bad.push_back({"short group sizes", a, "group_sizes has"}); break;
    }
  }
  for (const Bad& b : bad) {
    const Status st = plan->execute(b.args);
    EXPECT_FALSE(st.is_ok()) << b.what;
    EXPECT_NE(st.message().find(b.message), std::string::npos) << b.what << ": " << st.to_string();
  }
  ASSERT_TRUE(gpu()->synchronize().is_ok());
  std::vector<std::uint16_t> out(out_elems);
  ASSERT_TRUE(gpu()->download(out.data(), dev_ops.dout.p, out_elems * 2).is_ok());
  EXPECT_EQ(std::memcmp(out.data(), poison.data(), out_elems * 2), 0) << "a rejected call wrote the output";
  // and the good arguments still run
  ASSERT_TRUE(plan->execute(good).is_ok());
  ASSERT_TRUE(gpu()->synchronize().is_ok());
  ASSERT_TRUE(gpu()->download(out.data(), dev_ops.dout.p, out_elems * 2).is_ok());
  EXPECT_LT(rel_error(out, f.expected(gs)), 6e-3);
}

TEST(CudaBackend, RejectsHostBuffers) {
  REQUIRE_GPU();
  GraphFixture f;
  auto plan = f.cuda_plan();
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  std::vector<std::int32_t> gs(6, 0);
  std::vector<std::uint16_t> out(std::size_t(f.m * f.n));
  ExecuteArgs a;
  a.lhs = {f.lhs.data(), f.lhs.size() * 2, MemorySpace::kHost};
  a.rhs = {f.rhs.data(), f.rhs.size() * 2, MemorySpace::kHost};
  a.group_sizes = {gs.data(), gs.size() * 4, MemorySpace::kHost};
  a.out = {out.data(), out.size() * 2, MemorySpace::kHost};
  const Status st = plan->execute(a);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("memory"), std::string::npos) << st.to_string();
}

}  // namespace
}  // namespace ragdot
