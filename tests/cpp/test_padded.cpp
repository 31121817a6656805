// padded: dropless equals the oracle; a capacity factor drops the rows beyond capacity.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backends/cpu/reference.hpp"
#include "verify/check.hpp"

namespace ragdot {
namespace {

TEST(Padded, DroplessMatchesReference) {
  workloads::SplitMix64 rng(1);
  std::uint64_t seed = 1;
  for (int mode : {1, 2}) {
    for (DType dt : {DType::kF32, DType::kBF16}) {
      for (auto pat : {verify::GroupPattern::kRandom, verify::GroupPattern::kZeros, verify::GroupPattern::kAllInOne,
                       verify::GroupPattern::kPartialSum}) {
        auto gs = verify::make_group_sizes(pat, 5, mode == 1 ? 70 : 90, rng);
        auto c = verify::shaped_case(mode, 70, 90, 33, gs, dt);
        ASSERT_TRUE(c.ok());
        PlanOptions po;
        po.backend = "padded";
        auto r = verify::check_case(*c, po, seed++);
        EXPECT_TRUE(r.passed) << c->description << " " << r.plan << " " << r.message;
      }
    }
  }
}

TEST(Padded, CapacityFactorDropsRows) {
  const std::int64_t m = 20, k = 4, n = 3;
  auto op = RaggedDot::ragged_dot(m, k, n, 2, DType::kF32);
  ASSERT_TRUE(op.ok());
  PlanOptions po;
  po.backend = "padded";
  po.padded_capacity_factor = 1.0;  // capacity = ceil(20 / 2) = 10
  auto plan = make_plan(*op, po);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  std::vector<float> lhs(m * k), rhs(2 * k * n), out(m * n, -1.0f);
  verify::fill_random(lhs.data(), DType::kF32, m * k, 1);
  verify::fill_random(rhs.data(), DType::kF32, 2 * k * n, 2);
  std::vector<std::int32_t> gs{14, 6};  // group 0 loses 4 rows
  std::vector<unsigned char> ws(plan->workspace_bytes() + 64);
  void* wsp = reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(ws.data()) + 63) / 64 * 64);
  ExecuteReport report;
  ExecuteArgs a;
  a.lhs = {lhs.data(), lhs.size() * 4};
  a.rhs = {rhs.data(), rhs.size() * 4};
  a.group_sizes = {gs.data(), 8};
  a.out = {out.data(), out.size() * 4};
  a.workspace = {wsp, plan->workspace_bytes()};
  a.report = &report;
  ASSERT_TRUE(plan->execute(a).is_ok());
  EXPECT_EQ(report.capacity, 10);
  EXPECT_EQ(report.dropped_rows, 4);
  auto ref = cpu::ReferenceEvaluator::create(*op, lhs.data(), rhs.data(), gs.data());
  ASSERT_TRUE(ref.ok());
  for (std::int64_t r = 0; r < m; ++r) {
    const bool dropped = r >= 10 && r < 14;
    for (std::int64_t c = 0; c < n; ++c) {
      const float o = out[std::size_t(r * n + c)];
      if (dropped) {
        EXPECT_EQ(o, 0.0f) << "dropped row " << r;
      } else {
        EXPECT_NEAR(o, ref->at(r * n + c), 1e-5) << "row " << r;
      }
    }
  }
}

TEST(Padded, DroplessNeedsRoomForTheLargestGroup) {
  auto op = RaggedDot::ragged_dot(20, 4, 3, 2, DType::kF32);
  PlanOptions po;
  po.backend = "padded";
  po.padded_max_group_rows = 8;
  auto plan = make_plan(*op, po);
  ASSERT_TRUE(plan.ok());
  std::vector<float> lhs(80, 1.0f), rhs(24, 1.0f), out(60, -1.0f);
  std::vector<std::int32_t> gs{12, 8};
  std::vector<unsigned char> ws(plan->workspace_bytes() + 64);
  void* wsp = reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(ws.data()) + 63) / 64 * 64);
  ExecuteArgs a;
  a.lhs = {lhs.data(), 320};
  a.rhs = {rhs.data(), 96};
  a.group_sizes = {gs.data(), 8};
  a.out = {out.data(), 240};
  a.workspace = {wsp, plan->workspace_bytes()};
  Status st = plan->execute(a);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("largest group has 12 rows"), std::string::npos) << st.message();
  for (float v : out) EXPECT_EQ(v, -1.0f);
}

// Capacity factors that are not finite numbers, and dense buffers whose element count would
// overflow: clear errors at planning, never a wrapped workspace size.
TEST(Padded, BadFactorsAndHugeBuffersAreRejected) {
  auto op = RaggedDot::ragged_dot(20, 4, 3, 2, DType::kF32);
  ASSERT_TRUE(op.ok());
  PlanOptions po;
  po.backend = "padded";
  for (double factor : {0.0, -1.0, std::numeric_limits<double>::infinity(), std::nan("")}) {
    po.padded_capacity_factor = factor;
    const auto plan = make_plan(*op, po);
    EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument) << factor;
  }
  po.padded_capacity_factor = 1e300;  // finite and huge: every group may hold all the rows
  auto plan = make_plan(*op, po);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_NE(plan->variant().find("max_capacity=20"), std::string::npos) << plan->variant();
  // 2^31 rows, k 2^27, 2^24 groups: X would be 2^82 elements (a plan can be made without buffers)
  po.padded_capacity_factor.reset();
  auto huge = RaggedDot::ragged_dot(std::int64_t(1) << 31, std::int64_t(1) << 27, 0, std::int64_t(1) << 24, DType::kF32);
  ASSERT_TRUE(huge.ok()) << huge.status().to_string();
  const auto refused = make_plan(*huge, po);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << refused.status().to_string();
  EXPECT_NE(refused.status().message().find("too many elements"), std::string::npos) << refused.status().message();
}

TEST(Padded, NotChosenAutomatically) {
  auto op = RaggedDot::ragged_dot(20, 4, 3, 2, DType::kF32);
  for (int i = 0; i < 2; ++i) {
    auto plan = make_plan(*op, {});
    ASSERT_TRUE(plan.ok());
    EXPECT_NE(plan->backend(), "padded");
  }
}

}  // namespace
}  // namespace ragdot
