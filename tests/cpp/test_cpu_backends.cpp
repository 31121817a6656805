// cpu and cpu_ref against the oracle on fresh random inputs: every mode, dtype and kernel family,
// group sizes with zeros, odd and prime sizes, all rows in one group, sum < extent, group offsets,
// batch dims, several contracting / non-contracting dims and permuted layouts.
#include <gtest/gtest.h>

#include "isa_env.hpp"
#include "verify/check.hpp"

namespace ragdot {
namespace {

using verify::GroupPattern;

const GroupPattern kPatterns[] = {GroupPattern::kRandom,  GroupPattern::kZeros,    GroupPattern::kAllInOne,
                                  GroupPattern::kPartialSum, GroupPattern::kAllEmpty, GroupPattern::kUniform,
                                  GroupPattern::kPrimes};

// Returns false when the backend declined the case (then the oracle must take it instead).
bool expect_pass(const verify::Case& c, const std::string& backend, std::uint64_t seed) {
  PlanOptions po;
  po.backend = backend;
  auto r = verify::check_case(c, po, seed);
  if (!r.passed && r.message.rfind("unsupported: contracting dimensions listed ahead", 0) == 0) {
    po.backend = "cpu_ref";
    auto ref = verify::check_case(c, po, seed);
    EXPECT_TRUE(ref.passed) << c.description << "\n  " << ref.message;
    return false;
  }
  EXPECT_TRUE(r.passed) << c.description << "\n  " << r.plan << "\n  " << r.message;
  return true;
}

TEST(CpuBackend, ShapedCasesEveryKernel) {
  // Sizes chosen to cross every blocking edge: strips (12/32 rows), panels (32 cols, 256-col
  // blocks), the AMX 32-wide k step and its in-place path (k % 32 == 0), odd tails.
  struct Shape { std::int64_t m, k, n, g; };
  const Shape shapes[] = {{1, 1, 1, 1}, {37, 64, 70, 3}, {130, 33, 17, 5}, {300, 96, 300, 4}, {64, 7, 33, 8}};
  // and one long k (split into blocks) and one group taller than a unit's row chunk
  const Shape big[] = {{45, 1100, 40, 2}, {1100, 64, 40, 2}};
  workloads::SplitMix64 rng(7);
  std::uint64_t seed = 1;
  for (const auto& isa : testing::isas_here()) {
    testing::ScopedIsa scoped(isa);
    for (int mode = 1; mode <= 3; ++mode) {
      for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
        for (const auto& sh : shapes) {
          for (GroupPattern pat : kPatterns) {
            const std::int64_t extent = mode == 1 ? sh.m : mode == 2 ? sh.k : sh.g + 2;
            auto gs = verify::make_group_sizes(pat, sh.g, extent, rng);
            auto c = verify::shaped_case(mode, sh.m, sh.k, sh.n, gs, dt);
            ASSERT_TRUE(c.ok());
            if (mode == 3) {  // shaped_case sizes the batch from the sizes; keep it small
              c->spec.lhs.shape[0] = c->spec.rhs.shape[0] = std::max<std::int64_t>(extent, 1);
            }
            c->description = isa + " " + c->description + " " + verify::group_pattern_name(pat);
            expect_pass(*c, "cpu", seed++);
          }
        }
        for (const auto& sh : big) {
          if (mode == 3) continue;
          for (GroupPattern pat : {GroupPattern::kAllInOne, GroupPattern::kRandom}) {
            const std::int64_t extent = mode == 1 ? sh.m : sh.k;
            auto c = verify::shaped_case(mode, sh.m, sh.k, sh.n, verify::make_group_sizes(pat, sh.g, extent, rng), dt);
            ASSERT_TRUE(c.ok());
            c->description = isa + " large " + c->description + " " + verify::group_pattern_name(pat);
            expect_pass(*c, "cpu", seed++);
          }
        }
      }
    }
  }
}

TEST(CpuBackend, PackedRowsReusedAcrossColumnPanels) {
  // k = 1024 f32 rows are 4 KiB apart: the f32 kernels pack them and keep a unit's packed strips
  // for the thread's next units on the same rows. Several column panels (n = 200), groups taller
  // than a unit's row chunk (512) and partial strips; two threads so that units interleave.
  // k = 3072 splits into k blocks, each with its own strips in the cache.
  workloads::SplitMix64 rng(11);
  std::uint64_t seed = 500;
  for (const auto& isa : testing::isas_here()) {
    testing::ScopedIsa scoped(isa);
    for (DType dt : {DType::kF32, DType::kBF16}) {
      for (GroupPattern pat : {GroupPattern::kRandom, GroupPattern::kAllInOne, GroupPattern::kZeros}) {
        const std::int64_t k = pat == GroupPattern::kZeros ? 3072 : 1024;
        auto c = verify::shaped_case(1, 700, k, 200, verify::make_group_sizes(pat, 3, 700, rng), dt);
        ASSERT_TRUE(c.ok());
        c->description = isa + " packed-A reuse " + c->description + " " + verify::group_pattern_name(pat);
        PlanOptions po;
        po.backend = "cpu";
        po.num_threads = 2;
        auto r = verify::check_case(*c, po, seed++);
        EXPECT_TRUE(r.passed) << c->description << "\n  " << r.plan << "\n  " << r.message;
      }
    }
  }
}

TEST(CpuBackend, OutputDtypeDiffersFromInputs) {
  workloads::SplitMix64 rng(3);
  std::uint64_t seed = 100;
  for (const auto& isa : testing::isas_here()) {
    testing::ScopedIsa scoped(isa);
    for (DType in : {DType::kBF16, DType::kF16, DType::kF32}) {
      for (DType out : {DType::kF32, DType::kBF16, DType::kF16}) {
        auto gs = verify::make_group_sizes(GroupPattern::kRandom, 4, 90, rng);
        auto c = verify::shaped_case(1, 90, 64, 40, gs, in, out);
        ASSERT_TRUE(c.ok());
        expect_pass(*c, "cpu", seed++);
        auto c2 = verify::shaped_case(2, 24, 90, 40, verify::make_group_sizes(GroupPattern::kZeros, 4, 90, rng), in, out);
        ASSERT_TRUE(c2.ok());
        expect_pass(*c2, "cpu", seed++);
      }
    }
  }
}

TEST(CpuBackend, MixedInputDtypes) {
  workloads::SplitMix64 rng(5);
  auto gs = verify::make_group_sizes(GroupPattern::kRandom, 3, 50, rng);
  auto c = verify::shaped_case(1, 50, 40, 30, gs, DType::kBF16);
  ASSERT_TRUE(c.ok());
  c->spec.rhs.dtype = DType::kF32;
  expect_pass(*c, "cpu", 11);
  c->spec.lhs.dtype = DType::kF16;
  c->spec.rhs.dtype = DType::kBF16;
  expect_pass(*c, "cpu", 12);
}

TEST(CpuBackend, RandomGeneralCasesEveryKernel) {
  for (const auto& isa : testing::isas_here()) {
    testing::ScopedIsa scoped(isa);
    int declined = 0;
    for (std::uint64_t seed = 0; seed < 150; ++seed) {
      verify::CaseOptions o;
      auto c = verify::random_case(seed, o);
      c.description = isa + " " + c.description;
      declined += !expect_pass(c, "cpu", seed);
    }
    EXPECT_LT(declined, 15) << "only group sizes varying along a contracted dim may fall back";
  }
}

TEST(CpuBackend, TransposedWeightsAndBatchedForms) {
  // rhs [g, n, k] (dlhs in the backward pass) and lhs [b, m, k] with per-batch group sizes
  workloads::SplitMix64 rng(9);
  for (const auto& isa : testing::isas_here()) {
    testing::ScopedIsa scoped(isa);
    verify::Case c;
    c.spec.lhs = {DType::kBF16, {77, 64}};
    c.spec.rhs = {DType::kBF16, {3, 45, 64}};
    c.spec.group_sizes = {DType::kI32, {3}};
    c.spec.dims.dot = {{1}, {2}, {}, {}};
    c.spec.dims.lhs_ragged = {0};
    c.spec.dims.rhs_group = {0};
    c.group_sizes = verify::make_group_sizes(GroupPattern::kRandom, 3, 77, rng);
    c.description = isa + " rhs [g,n,k]";
    expect_pass(c, "cpu", 21);

    verify::Case b;
    b.spec.lhs = {DType::kF32, {3, 40, 16}};
    b.spec.rhs = {DType::kF32, {3, 4, 16, 20}};
    b.spec.group_sizes = {DType::kI64, {3, 4}};
    b.spec.dims.dot = {{2}, {2}, {0}, {0}};
    b.spec.dims.lhs_ragged = {1};
    b.spec.dims.rhs_group = {1};
    for (int r = 0; r < 3; ++r) {
      auto row = verify::make_group_sizes(GroupPattern::kPartialSum, 4, 40, rng);
      b.group_sizes.insert(b.group_sizes.end(), row.begin(), row.end());
    }
    b.description = isa + " batched with [b, g] group sizes";
    expect_pass(b, "cpu", 22);
  }
}

TEST(CpuRefBackend, RandomGeneralCases) {
  // The oracle as a backend goes through the same execute path (buffers, rounding to the out dtype).
  for (std::uint64_t seed = 0; seed < 60; ++seed) {
    verify::CaseOptions o;
    o.max_dim = 16;
    expect_pass(verify::random_case(seed + 1000, o), "cpu_ref", seed);
  }
}

TEST(CpuBackend, AutomaticChoiceIsCpuForHostMemory) {
  auto op = RaggedDot::ragged_dot(64, 32, 32, 4, DType::kBF16);
  ASSERT_TRUE(op.ok());
  PlanOptions po;
  po.memory_space = MemorySpace::kHost;
  auto plan = make_plan(*op, po);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->backend(), "cpu");
  EXPECT_NE(plan->to_string().find("backend=cpu"), std::string::npos);
  EXPECT_NE(plan->to_string().find("graph_safe=no"), std::string::npos);
}

TEST(CpuBackend, ContractingPrefixDimsFallBackToReference) {
  // Group sizes that vary along a contracted dim: only the oracle takes these.
  verify::Case c;
  c.spec.lhs = {DType::kF32, {3, 5, 2}};
  c.spec.rhs = {DType::kF32, {3, 5, 4}};
  c.spec.group_sizes = {DType::kI32, {3, 2}};
  c.spec.dims.dot = {{0, 1}, {0, 1}, {}, {}};
  c.spec.dims.lhs_ragged = {1};
  c.spec.dims.rhs_group = {};
  c.group_sizes = {2, 3, 0, 5, 1, 1};
  auto op = RaggedDot::create(c.spec);
  ASSERT_TRUE(op.ok()) << op.status().to_string();
  PlanOptions named;
  named.backend = "cpu";
  EXPECT_EQ(make_plan(*op, named).status().code(), StatusCode::kUnsupported);
  auto plan = make_plan(*op, {});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->backend(), "cpu_ref");
  PlanOptions any;
  auto r = verify::check_case(c, any, 5);
  EXPECT_TRUE(r.passed) << r.message;
}

}  // namespace
}  // namespace ragdot
