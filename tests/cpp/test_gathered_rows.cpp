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

// Mode 1: lhs [m, k] gathered from a table of `table_rows` rows, rhs [g, k, n]. Mode 2 (the
// weight gradient): lhs [k, m] ragged along k, its k rows gathered, rhs [k, n], out [g, m, n].
verify::Case gathered_case(std::int64_t m, std::int64_t k, std::int64_t n, std::vector<std::int64_t> gs,
                           std::int64_t table_rows, DType dt, std::uint64_t seed, int mode = 1) {
  auto made = verify::shaped_case(mode, m, k, n, gs, dt, std::nullopt);
  EXPECT_TRUE(made.ok()) << made.status().to_string();
  verify::Case c = made.ok() ? *made : verify::Case{};
  c.lhs_table_rows = table_rows;
  workloads::SplitMix64 rng(seed);
  const std::int64_t rows = mode == 2 ? k : m;
  for (std::int64_t i = 0; i < rows; ++i) {
    // mostly rows of the table, repeated and out of order; some outside it (read as zeros)
    const std::uint64_t pick = rng.next() % 16;
    c.lhs_rows.push_back(pick == 0 ? -1 : pick == 1 ? std::int32_t(table_rows + 3)
                                                    : std::int32_t(rng.next() % std::uint64_t(table_rows)));
  }
  c.description = "mode " + std::to_string(mode) + " gathered lhs " + std::to_string(rows) + " rows from " +
                  std::to_string(table_rows);
  return c;
}

// cpu_ref and cpu against the float64 reference of the rows gathered first, in mode 1 and in
// mode 2 (the same shapes with m and k swapped in meaning: the gathered rows are the ragged k):
// small cases, and for cpu one with several row strips, k blocks and column panels, on one and
// two threads and with every kernel family this machine has.
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
        for (int mode : {1, 2})
        for (const Shape& sh : shapes) {
          if (std::string(backend) == "cpu_ref" && sh.k > 100) continue;  // the oracle's loops are slow
          // (mode 2: the shape's m rows are the ragged k its groups split)
          const verify::Case c = mode == 1 ? gathered_case(sh.m, sh.k, sh.n, sh.gs, sh.table, dt, seed)
                                           : gathered_case(sh.k, sh.m, sh.n, sh.gs, sh.table, dt, seed, 2);
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

TEST(GatheredRows, OnlyATwoDimensionalLhsWithContiguousRowsGathers) {
  PlanOptions po;
  po.backend = "cpu_ref";
  po.lhs_gather_rows = 4;
  // mode 3 (ragged batch): no
  {
    auto made = verify::shaped_case(3, 16, 8, 6, {8, 8}, DType::kF32, DType::kF32);
    ASSERT_TRUE(made.ok()) << made.status().to_string();
    auto other = RaggedDot::create(made->spec);
    ASSERT_TRUE(other.ok()) << other.status().to_string();
    const auto st = make_plan(*other, po).status();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "mode 3: " << st.to_string();
  }
  // mode 2 with lhs [M, K] (contracting dim 1: the rows are not k): no; lhs [K, M]: yes
  {
    auto made = verify::shaped_case(2, 16, 8, 6, {4, 4}, DType::kF32, DType::kF32);
    ASSERT_TRUE(made.ok());
    RaggedDotSpec transposed = made->spec;
    transposed.lhs.shape = {16, 8};
    transposed.dims.dot.lhs_contracting = {1};
    transposed.dims.lhs_ragged = {1};
    auto op = RaggedDot::create(transposed);
    ASSERT_TRUE(op.ok()) << op.status().to_string();
    EXPECT_EQ(make_plan(*op, po).status().code(), StatusCode::kInvalidArgument);
    auto plain = RaggedDot::create(made->spec);
    ASSERT_TRUE(plain.ok());
    EXPECT_TRUE(make_plan(*plain, po).ok());
  }
  // negative table
  const verify::Case c = gathered_case(16, 8, 8, {8, 8}, 5, DType::kF32, 4);
  auto op = RaggedDot::create(c.spec);
  ASSERT_TRUE(op.ok());
  po.lhs_gather_rows = -1;
  EXPECT_EQ(make_plan(*op, po).status().code(), StatusCode::kInvalidArgument);
  // tables past int32 indices, and one whose element count would wrap to 0 (2^62 rows x 8)
  for (std::int64_t rows : {std::int64_t(1) << 31, std::int64_t(1) << 62}) {
    po.lhs_gather_rows = rows;
    const auto huge = make_plan(*op, po);
    EXPECT_EQ(huge.status().code(), StatusCode::kInvalidArgument) << rows;
    EXPECT_NE(huge.status().message().find("lhs_gather_rows"), std::string::npos) << huge.status().message();
  }
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
