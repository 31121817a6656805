// The scatter-add of output rows (PlanOptions::out_scatter_rows): a mode 1 plan that adds row i of
// its product, rounded to the output dtype and times row_scales[i], into row out_rows[i] of an f32
// table. Here: cpu_ref on an exact case and against the float64 check on every group pattern with
// rows repeated, dropped and out of range; the planner's checks and backend choice; execute's
// buffer checks. The cuda backend's epilogue is checked on a GPU in test_cuda_backend
// (HopperScatterAddRows).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ragdot/plan.hpp"
#include "verify/check.hpp"

namespace ragdot {
namespace {

RaggedDotSpec spec_of(std::int64_t m, std::int64_t k, std::int64_t n, std::int64_t g, DType dt) {
  return {{dt, {m, k}}, {dt, {g, k, n}}, {DType::kI32, {g}}, RaggedDotDimensionNumbers::ragged_dot(), std::nullopt,
          std::nullopt};
}

// A case whose rows go to a table of `table_rows` rows: mostly in range and repeated (several rows
// into one table row, as an MoE token's top-k rows), some -1 and some past the table.
verify::Case scatter_case(verify::Case c, std::int64_t table_rows, workloads::SplitMix64& rng) {
  const std::int64_t m = c.spec.lhs.shape[0];
  c.out_table_rows = table_rows;
  for (std::int64_t i = 0; i < m; ++i) {
    const std::uint64_t pick = rng.next() % 16;
    c.out_rows.push_back(pick == 0 ? -1 : pick == 1 ? std::int32_t(table_rows)
                                                    : std::int32_t(rng.next() % std::uint64_t(table_rows)));
    c.row_scales.push_back(float(rng.uniform()));
  }
  c.description += " scattered into " + std::to_string(table_rows) + " rows";
  return c;
}

// Every product element is 8 * 0.5 * 0.25 = 1 (exact): each table row gains the sum of its rows'
// scales, exactly, in every column.
TEST(ScatterRows, CpuRefAddsEachScaledRowToItsTableRow) {
  const std::int64_t m = 6, k = 8, n = 4;
  auto op = RaggedDot::create(spec_of(m, k, n, 2, DType::kF32));
  ASSERT_TRUE(op.ok());
  PlanOptions po;
  po.backend = "cpu_ref";
  po.out_scatter_rows = 3;
  auto plan = make_plan(*op, po);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_NE(plan->to_string().find("scatter-add-rows=3"), std::string::npos) << plan->to_string();
  std::vector<float> lhs(m * k, 0.5f), rhs(2 * k * n, 0.25f), table(3 * n, 10.0f);
  std::vector<std::int32_t> gs{2, 4}, rows{2, 0, 2, -1, 3, 0};
  std::vector<float> scales{0.5f, 1.0f, 0.25f, 8.0f, 8.0f, 2.0f};
  ExecuteArgs a;
  a.lhs = {lhs.data(), lhs.size() * 4};
  a.rhs = {rhs.data(), rhs.size() * 4};
  a.group_sizes = {gs.data(), gs.size() * 4};
  a.out = {table.data(), table.size() * 4};
  a.out_rows = {rows.data(), rows.size() * 4};
  a.row_scales = {scales.data(), scales.size() * 4};
  ASSERT_TRUE(plan->execute(a).is_ok());
  const float want[3] = {10.0f + 1.0f + 2.0f, 10.0f, 10.0f + 0.5f + 0.25f};  // rows -1 and 3 dropped
  for (std::int64_t r = 0; r < 3; ++r)
    for (std::int64_t c = 0; c < n; ++c) EXPECT_EQ(table[std::size_t(r * n + c)], want[r]) << r << "," << c;
}

// The check the GPU tests use: every group pattern, 16-bit and f32 outputs.
TEST(ScatterRows, TheCheckOfGpuTestsPassesTheOracleBackend) {
  workloads::SplitMix64 rng(9);
  std::uint64_t seed = 1;
  for (DType out : {DType::kBF16, DType::kF32}) {
    for (auto pattern : {verify::GroupPattern::kRandom, verify::GroupPattern::kZeros, verify::GroupPattern::kAllInOne,
                         verify::GroupPattern::kPartialSum, verify::GroupPattern::kAllEmpty}) {
      auto c = verify::shaped_case(1, 37, 16, 24, verify::make_group_sizes(pattern, 3, 37, rng), DType::kBF16, out);
      ASSERT_TRUE(c.ok()) << c.status().to_string();
      const verify::Case sc = scatter_case(*c, 9, rng);
      PlanOptions po;
      po.backend = "cpu_ref";
      const auto r = verify::check_case(sc, po, seed++);
      EXPECT_TRUE(r.passed) << verify::group_pattern_name(pattern) << ": " << r.message << "\n  " << r.plan;
      verify::Case sampled = sc;  // the large cases' form: every third table row compared
      sampled.table_row_stride = 3;
      const auto rs = verify::check_case(sampled, po, seed++);
      EXPECT_TRUE(rs.passed) << verify::group_pattern_name(pattern) << " sampled: " << rs.message << "\n  " << rs.plan;
    }
  }
}

TEST(ScatterRows, PlannerTakesOnlyAModeOneProduct) {
  PlanOptions po;
  po.backend = "cpu_ref";
  po.out_scatter_rows = 4;
  for (int mode : {2, 3}) {
    auto made = verify::shaped_case(mode, 16, 8, 6, {8, 8}, DType::kF32, DType::kF32);
    ASSERT_TRUE(made.ok());
    auto other = RaggedDot::create(made->spec);
    ASSERT_TRUE(other.ok());
    EXPECT_EQ(make_plan(*other, po).status().code(), StatusCode::kInvalidArgument) << "mode " << mode;
  }
  auto op = RaggedDot::create(spec_of(16, 8, 8, 2, DType::kF32));
  ASSERT_TRUE(op.ok());
  po.swiglu_epilogue = true;
  EXPECT_EQ(make_plan(*op, po).status().code(), StatusCode::kInvalidArgument);
  po.swiglu_epilogue = false;
  po.out_scatter_rows = -1;
  EXPECT_EQ(make_plan(*op, po).status().code(), StatusCode::kInvalidArgument);
  // tables past int32 indices, and one whose element count would wrap to 0 (2^62 rows x 8)
  for (std::int64_t rows : {std::int64_t(1) << 31, std::int64_t(1) << 62}) {
    po.out_scatter_rows = rows;
    const auto huge = make_plan(*op, po);
    EXPECT_EQ(huge.status().code(), StatusCode::kInvalidArgument) << rows;
    EXPECT_NE(huge.status().message().find("out_scatter_rows"), std::string::npos) << huge.status().message();
  }
  // automatic choice among host backends: cpu and padded cannot, cpu_ref can
  PlanOptions host;
  host.memory_space = MemorySpace::kHost;
  host.out_scatter_rows = 4;
  auto plan = make_plan(*op, host);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->backend(), "cpu_ref");
  for (const char* named : {"cpu", "padded"}) {
    host.backend = named;
    auto refused = make_plan(*op, host);
    EXPECT_EQ(refused.status().code(), StatusCode::kUnsupported) << named;
  }
}

// Missing or short index and scale buffers, or a short table: an error, and the table as it was.
TEST(ScatterRows, ExecuteChecksTheIndexTheScalesAndTheTable) {
  const std::int64_t m = 16, k = 8, n = 8, table_rows = 5;
  auto op = RaggedDot::create(spec_of(m, k, n, 2, DType::kF32));
  ASSERT_TRUE(op.ok());
  PlanOptions po;
  po.backend = "cpu_ref";
  po.out_scatter_rows = table_rows;
  auto plan = make_plan(*op, po);
  ASSERT_TRUE(plan.ok());
  std::vector<float> lhs(m * k, 0.5f), rhs(2 * k * n, 0.25f), table(table_rows * n, -7.0f), scales(m, 1.0f);
  std::vector<std::int32_t> gs{8, 8}, rows(m, 1);
  ExecuteArgs good;
  good.lhs = {lhs.data(), lhs.size() * 4};
  good.rhs = {rhs.data(), rhs.size() * 4};
  good.group_sizes = {gs.data(), gs.size() * 4};
  good.out = {table.data(), table.size() * 4};
  good.out_rows = {rows.data(), rows.size() * 4};
  good.row_scales = {scales.data(), scales.size() * 4};
  auto untouched = [&] {
    for (float v : table)
      if (v != -7.0f) return false;
    return true;
  };
  ExecuteArgs a = good;
  a.out_rows = {};
  EXPECT_FALSE(plan->execute(a).is_ok());
  a = good;
  a.row_scales = {scales.data(), (scales.size() - 1) * 4};
  EXPECT_FALSE(plan->execute(a).is_ok());
  a = good;
  a.out = {table.data(), (table.size() - 1) * 4};
  EXPECT_FALSE(plan->execute(a).is_ok());
  EXPECT_TRUE(untouched());
  ASSERT_TRUE(plan->execute(good).is_ok());
  EXPECT_EQ(table[std::size_t(1 * n)], -7.0f + 16.0f);  // all 16 rows, each 1, into table row 1
  EXPECT_EQ(table[0], -7.0f);
}

}  // namespace
}  // namespace ragdot
