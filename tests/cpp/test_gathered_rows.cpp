// Gathered lhs rows (PlanOptions::lhs_gather_rows): plans that read row i of the lhs as row
// lhs_rows[i] of a table, on the host backends (cpu_ref and cpu), and the errors around them. The cuda backend's
// gathering kernels are checked in test_cuda_backend (HopperGatheredRows).
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "isa_env.hpp"
#include "ragdot/plan.hpp"
#include "verify/check.hpp"

namespace ragdot {
namespace {

// lhs [m, k] gathered from a table of `table_rows` rows, rhs [g, k, n].
verify::Case gathered_case(std::int64_t m, std::int64_t k, std::int64_t n, std::vector<std::int64_t> gs,
                           std::int64_t table_rows, DType dt, std::uint64_t seed) {
  verify::Case c;
  const std::int64_t g = std::int64_t(gs.size());
  c.spec = {{dt, {m, k}}, {dt, {g, k, n}}, {DType::kI32, {g}}, RaggedDotDimensionNumbers::ragged_dot(),
            std::nullopt, std::nullopt};
  c.group_sizes = std::move(gs);
  c.lhs_table_rows = table_rows;
  workloads::SplitMix64 rng(seed);
  for (std::int64_t i = 0; i < m; ++i) {
    // mostly rows of the table, repeated and out of order; some outside it (read as zeros)
    const std::uint64_t pick = rng.next() % 16;
    c.lhs_rows.push_back(pick == 0 ? -1 : pick == 1 ? std::int32_t(table_rows + 3)
                                                    : std::int32_t(rng.next() % std::uint64_t(table_rows)));
  }
  c.description = "gathered lhs " + std::to_string(m) + " rows from " + std::to_string(table_rows);
  return c;
}

// cpu_ref and cpu against the float64 reference of the rows gathered first: small cases, and
// for cpu one with several row strips, k blocks and column panels, on one and two threads and
// with every kernel family this machine has.
TEST(GatheredRows, HostBackendsMatchTheRowsGatheredFirst) {
  struct Shape {
    std::int64_t m, k, n;
    std::vector<std::int64_t> gs;
    std::int64_t table;
  };
  const Shape shapes[] = {{40, 24, 16, {20, 0, 17, 3}, 11},
                          {40, 24, 16, {40, 0, 0, 0}, 11},
                          {40, 24, 16, {5, 0, 9, 0}, 11},
                          {200, 1100, 300, {77, 0, 100, 13}, 150}};
  std::uint64_t seed = 1;
  std::vector<std::pair<std::string, std::string>> runs = {{"cpu_ref", ""}};
  for (const std::string& isa : testing::isas_here()) runs.push_back({"cpu", isa});
  for (const auto& [backend_name, isa] : runs) {
    const char* backend = backend_name.c_str();
    std::optional<testing::ScopedIsa> scoped;
    if (!isa.empty()) scoped.emplace(isa);
    for (int threads : {1, 2}) {
      if (std::string(backend) == "cpu_ref" && threads == 2) continue;
      for (DType dt : {DType::kF32, DType::kBF16}) {
        for (const Shape& sh : shapes) {
          if (std::string(backend) == "cpu_ref" && sh.k > 100) continue;  // the oracle's loops are slow
          const verify::Case c = gathered_case(sh.m, sh.k, sh.n, sh.gs, sh.table, dt, seed);
          PlanOptions po;
          po.backend = backend;
          po.num_threads = threads;
          // the check gathers the rows itself for its float64 reference: only rounding to the
          // output dtype may separate the two
          const auto r = verify::check_case(c, po, seed++);
          EXPECT_TRUE(r.passed) << backend << " " << isa << " " << threads << " threads, " << c.description << ": "
                                << r.message
                                << "\n  " << r.plan;
          if (std::string(backend) == "cpu") EXPECT_NE(r.plan.find("+gathered-lhs"), std::string::npos) << r.plan;
        }
      }
    }
  }
}

TEST(GatheredRows, BackendsThatCannotGatherAreNotChosen) {
  const verify::Case c = gathered_case(16, 8, 8, {8, 8}, 5, DType::kF32, 3);
  auto op = RaggedDot::create(c.spec);
  ASSERT_TRUE(op.ok());
  PlanOptions po;
  po.memory_space = MemorySpace::kHost;
  po.lhs_gather_rows = 5;
  auto plan = make_plan(*op, po);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->backend(), "cpu");  // the first host backend, which gathers
  for (const char* named : {"padded"}) {
    po.backend = named;
    auto refused = make_plan(*op, po);
    EXPECT_EQ(refused.status().code(), StatusCode::kUnsupported) << named;
    EXPECT_NE(refused.status().message().find("gather"), std::string::npos) << refused.status().message();
  }
}

TEST(GatheredRows, OnlyAModeOneTwoDimensionalLhsGathers) {
  PlanOptions po;
  po.backend = "cpu_ref";
  po.lhs_gather_rows = 4;
  // mode 2 (ragged contracting) and mode 3 (ragged batch)
  for (int mode : {2, 3}) {
    auto made = verify::shaped_case(mode, 16, 8, 6, {8, 8}, DType::kF32, DType::kF32);
    ASSERT_TRUE(made.ok()) << made.status().to_string();
    auto other = RaggedDot::create(made->spec);
    ASSERT_TRUE(other.ok()) << other.status().to_string();
    const auto st = make_plan(*other, po).status();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "mode " << mode << ": " << st.to_string();
  }
  // negative table
  const verify::Case c = gathered_case(16, 8, 8, {8, 8}, 5, DType::kF32, 4);
  auto op = RaggedDot::create(c.spec);
  ASSERT_TRUE(op.ok());
  po.lhs_gather_rows = -1;
  EXPECT_EQ(make_plan(*op, po).status().code(), StatusCode::kInvalidArgument);
}

TEST(GatheredRows, ExecuteChecksTheIndexAndTheTable) {
  const verify::Case c = gathered_case(16, 8, 8, {8, 8}, 5, DType::kF32, 5);
  auto op = RaggedDot::create(c.spec);
  ASSERT_TRUE(op.ok());
  PlanOptions po;
  po.backend = "cpu_ref";
  po.lhs_gather_rows = 5;
  auto plan = make_plan(*op, po);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  std::vector<float> table(5 * 8, 0.5f), rhs(2 * 8 * 8, 0.25f), out(16 * 8, -7.0f);
  std::vector<std::int32_t> gs{8, 8}, rows(c.lhs_rows.begin(), c.lhs_rows.end());
  ExecuteArgs a;
  a.lhs = {table.data(), table.size() * 4};
  a.rhs = {rhs.data(), rhs.size() * 4};
  a.group_sizes = {gs.data(), gs.size() * 4};
  a.out = {out.data(), out.size() * 4};
  a.lhs_rows = {rows.data(), rows.size() * 4};
  auto untouched = [&] {
    for (float v : out)
      if (v != -7.0f) return false;
    return true;
  };
  auto expect_rejected = [&](ExecuteArgs bad, const char* fragment) {
    const Status st = plan->execute(bad);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
    EXPECT_NE(st.message().find(fragment), std::string::npos) << st.message();
    EXPECT_TRUE(untouched()) << fragment;
  };
  ExecuteArgs bad = a;
  bad.lhs_rows = {};
  expect_rejected(bad, "lhs_rows is null");
  bad = a;
  bad.lhs_rows.bytes = 15 * 4;
  expect_rejected(bad, "lhs_rows has");
  bad = a;
  bad.lhs.bytes = 4 * 8 * 4;  // 4 rows, the plan's table has 5
  expect_rejected(bad, "lhs has");
  bad = a;
  bad.out = {table.data(), table.size() * 4};
  bad.lhs_rows = {out.data(), rows.size() * 4};  // out over the index
  bad.out = {out.data(), out.size() * 4};
  expect_rejected(bad, "overlaps lhs_rows");
  ASSERT_TRUE(plan->execute(a).is_ok());
  // row i is table row rows[i] (all 0.5) or zeros: every output is 8 * 0.5 * 0.25 = 1 or 0
  for (std::size_t i = 0; i < 16; ++i) {
    const bool in = rows[i] >= 0 && rows[i] < 5;
    EXPECT_EQ(out[i * 8], in ? 1.0f : 0.0f) << "row " << i << " index " << rows[i];
  }
}

}  // namespace
}  // namespace ragdot
