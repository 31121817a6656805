// Bad input at execute time: a clear error, and nothing written.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <optional>

#include "ragdot/plan.hpp"
#include "verify/check.hpp"

namespace ragdot {
namespace {

struct Fixture {
  std::int64_t m = 12, k = 8, n = 6, g = 3;
  std::vector<float> lhs, rhs, out;
  std::vector<std::int32_t> gs{4, 0, 5};
  std::vector<unsigned char> ws_storage;
  void* ws = nullptr;
  Plan plan;

  static Plan make(const std::string& backend, std::optional<GroupOffset> off = std::nullopt, std::int64_t rhs_g = 3) {
    RaggedDotSpec s{{DType::kF32, {12, 8}}, {DType::kF32, {rhs_g, 8, 6}}, {DType::kI32, {3}},
                    RaggedDotDimensionNumbers::ragged_dot(), std::nullopt, off};
    auto op = RaggedDot::create(s);
    EXPECT_TRUE(op.ok()) << op.status().to_string();
    PlanOptions po;
    po.backend = backend;
    auto p = make_plan(*op, po);
    EXPECT_TRUE(p.ok()) << p.status().to_string();
    return std::move(p).value();
  }

  explicit Fixture(const std::string& backend, std::optional<GroupOffset> off = std::nullopt)
      : plan(make(backend, off, off ? off->local_groups : 3)) {
    lhs.assign(std::size_t(m * k), 0.5f);
    rhs.assign(std::size_t(g * k * n), 0.25f);
    out.assign(std::size_t(m * n), -7.0f);
    ws_storage.resize(plan.workspace_bytes() + 128);
    ws = reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(ws_storage.data()) + 63) / 64 * 64);
  }

  ExecuteArgs args() {
    ExecuteArgs a;
    a.lhs = {lhs.data(), lhs.size() * 4};
    a.rhs = {rhs.data(), plan.op().spec().rhs.num_bytes()};
    a.group_sizes = {gs.data(), gs.size() * 4};
    a.out = {out.data(), out.size() * 4};
    a.workspace = {ws, plan.workspace_bytes()};
    return a;
  }

  bool out_untouched() const {
    for (float v : out) {
      if (v != -7.0f) return false;
    }
    return true;
  }
};

void expect_rejected(Fixture& f, const ExecuteArgs& a, const std::string& fragment) {
  Status st = f.plan.execute(a);
  EXPECT_FALSE(st.is_ok()) << "accepted; expected '" << fragment << "'";
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find(fragment), std::string::npos) << "message: " << st.message();
  EXPECT_TRUE(f.out_untouched()) << "output written despite the error: " << fragment;
}

class ExecuteChecks : public ::testing::TestWithParam<std::string> {};

TEST_P(ExecuteChecks, GoodArgsRun) {
  Fixture f(GetParam());
  Status st = f.plan.execute(f.args());
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_FLOAT_EQ(f.out[0], 8 * 0.5f * 0.25f);
  EXPECT_EQ(f.out[9 * 6], 0.0f) << "rows past sum(group_sizes) must be zero";
}

TEST_P(ExecuteChecks, RejectsBadBuffers) {
  Fixture f(GetParam());
  auto a = f.args();
  a.lhs.data = nullptr;
  expect_rejected(f, a, "lhs is null");
  a = f.args();
  a.rhs.bytes -= 4;
  expect_rejected(f, a, "rhs has 572 bytes; the plan needs 576");
  a = f.args();
  a.out.data = reinterpret_cast<char*>(f.out.data()) + 1;
  a.out.bytes -= 4;
  expect_rejected(f, a, "out has");
  std::vector<float> roomy(f.lhs.size() + 1, 0.5f);
  a = f.args();
  a.lhs.data = reinterpret_cast<const char*>(roomy.data()) + 2;
  expect_rejected(f, a, "lhs is not aligned to 4 bytes");
  a = f.args();
  a.group_sizes.space = MemorySpace::kDevice;
  expect_rejected(f, a, "group_sizes is in device memory; the plan runs on host memory");
  a = f.args();
  a.out.data = f.lhs.data();
  expect_rejected(f, a, "out overlaps lhs");
  if (f.plan.workspace_bytes()) {
    a = f.args();
    a.workspace.bytes = f.plan.workspace_bytes() - 1;
    expect_rejected(f, a, "workspace has");
  }
}

TEST_P(ExecuteChecks, RejectsBadGroupSizes) {
  Fixture f(GetParam());
  f.gs = {4, -3, 5};
  expect_rejected(f, f.args(), "group_sizes[1] = -3 is negative");
  f.gs = {4, 5, 4};
  expect_rejected(f, f.args(), "sum to more than the ragged dimension's size 12");
  f.gs = {2147483647, 0, 0};
  expect_rejected(f, f.args(), "sum to more than");
}

TEST_P(ExecuteChecks, RejectsBadGroupOffset) {
  Fixture f(GetParam(), GroupOffset{2});
  auto a = f.args();
  expect_rejected(f, a, "group_offset is null");
  std::int32_t off = 2;  // groups [2, 4) of 3
  a.group_offset = {&off, 4};
  expect_rejected(f, a, "group_offset 2 with 2 local groups is outside the 3 groups");
  off = -1;
  expect_rejected(f, a, "group_offset -1");
  off = 1;
  Status st = f.plan.execute(a);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_EQ(f.out[0], 0.0f) << "rows of groups outside the range are zero";
  EXPECT_FLOAT_EQ(f.out[5 * 6], 8 * 0.5f * 0.25f);
}

// A plan of ragged_dot(m, k, n, g) f32 on the backend under test, with an aligned workspace.
struct PlannedEmpty {
  Plan plan;
  std::vector<unsigned char> ws_storage;
  MutableBuffer workspace() {
    void* ws = reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(ws_storage.data()) + 63) / 64 * 64);
    return {plan.workspace_bytes() ? ws : nullptr, plan.workspace_bytes()};
  }
};

std::optional<PlannedEmpty> plan_ragged_dot(const std::string& backend, std::int64_t m, std::int64_t k, std::int64_t n,
                                            std::int64_t g) {
  auto op = RaggedDot::ragged_dot(m, k, n, g, DType::kF32);
  EXPECT_TRUE(op.ok()) << op.status().to_string();
  if (!op.ok()) return std::nullopt;
  PlanOptions po;
  po.backend = backend;
  auto plan = make_plan(*op, po);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  if (!plan.ok()) return std::nullopt;
  const std::size_t bytes = plan->workspace_bytes() + 128;
  return PlannedEmpty{std::move(*plan), std::vector<unsigned char>(bytes)};
}

TEST_P(ExecuteChecks, EmptyOutputMayBeNull) {
  // n = 0: the output has no elements, so a null output buffer is valid and nothing is written.
  // Group sizes are still checked. Found by the fuzzer (memset, and in the padded baseline
  // memcpy, on the null output; UBSan reports both).
  auto p = plan_ragged_dot(GetParam(), 12, 8, 0, 3);
  ASSERT_TRUE(p);
  std::vector<float> lhs(12 * 8, 0.5f);
  std::vector<std::int32_t> gs{4, 0, 5};  // rows 9..11 belong to no group
  ExecuteArgs a;
  a.lhs = {lhs.data(), lhs.size() * 4};
  a.rhs = {nullptr, 0};
  a.group_sizes = {gs.data(), gs.size() * 4};
  a.out = {nullptr, 0};
  a.workspace = p->workspace();
  Status st = p->plan.execute(a);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  gs[1] = -1;
  st = p->plan.execute(a);
  EXPECT_FALSE(st.is_ok());
}

TEST_P(ExecuteChecks, EmptyOperandsMayBeNull) {
  // k = 0: lhs and rhs have no elements (null buffers are valid) and every output row is zero.
  auto p = plan_ragged_dot(GetParam(), 12, 0, 5, 3);
  ASSERT_TRUE(p);
  std::vector<std::int32_t> gs{4, 0, 5};
  std::vector<float> out(12 * 5, std::numeric_limits<float>::quiet_NaN());
  ExecuteArgs a;
  a.lhs = {nullptr, 0};
  a.rhs = {nullptr, 0};
  a.group_sizes = {gs.data(), gs.size() * 4};
  a.out = {out.data(), out.size() * 4};
  a.workspace = p->workspace();
  Status st = p->plan.execute(a);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

INSTANTIATE_TEST_SUITE_P(HostBackends, ExecuteChecks, ::testing::Values("cpu", "cpu_ref", "padded"));

TEST(Plan, NamesAndErrors) {
  auto op = RaggedDot::ragged_dot(8, 4, 4, 2, DType::kF32);
  ASSERT_TRUE(op.ok());
  PlanOptions po;
  po.backend = "no-such-backend";
  auto p = make_plan(*op, po);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("no backend named 'no-such-backend'"), std::string::npos);
  auto infos = list_backends();
  ASSERT_FALSE(infos.empty());
  EXPECT_EQ(infos.back().name, "cpu_ref") << "the reference comes last";
}

TEST(Plan, EnvironmentPicksBackend) {
  auto op = RaggedDot::ragged_dot(8, 4, 4, 2, DType::kF32);
  ASSERT_TRUE(op.ok());
  setenv("RAGDOT_BACKEND", "cpu_ref", 1);
  auto p = make_plan(*op, {});
  unsetenv("RAGDOT_BACKEND");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->backend(), "cpu_ref");
}

// The host backends keep one GEMM task per (batch index, group) in the workspace. 2^29 batches of
// 2^29 groups fit every tensor's element limit (rhs [2^29, 2^29, 1, 1]), but their tasks' bytes
// would wrap the workspace size: a clear error at planning, never a wrapped size.
TEST(Plan, TaskCountsThatWouldWrapTheWorkspaceAreRejected) {
  const std::int64_t big = std::int64_t(1) << 29;
  auto op = RaggedDot::create(verify::batched_forward_spec(big, 0, 1, 1, big, DType::kF32));
  ASSERT_TRUE(op.ok()) << op.status().to_string();
  auto expect_refused = [](const RaggedDot& huge, const char* backend) {
    PlanOptions po;
    po.backend = backend;
    const auto plan = make_plan(huge, po);
    ASSERT_FALSE(plan.ok()) << backend << ": workspace " << plan->workspace_bytes();
    EXPECT_EQ(plan.status().code(), StatusCode::kResourceExhausted) << backend << ": " << plan.status().message();
    EXPECT_NE(plan.status().message().find("tasks"), std::string::npos) << backend << ": " << plan.status().message();
  };
  expect_refused(*op, "cpu");
  // the padded baseline takes no batch dims: 2^58 groups of [1, 1] weights and no rows
  {
    const auto groups_op = RaggedDot::ragged_dot(0, 1, 1, big << 29, DType::kF32);
    ASSERT_TRUE(groups_op.ok()) << groups_op.status().to_string();
    expect_refused(*groups_op, "padded");
    expect_refused(*groups_op, "cpu");
  }
  // 2^29 batches of 2^19 groups fit, and plan
  op = RaggedDot::create(verify::batched_forward_spec(big, 0, 1, 1, big >> 10, DType::kF32));
  ASSERT_TRUE(op.ok()) << op.status().to_string();
  PlanOptions po;
  po.backend = "cpu";
  const auto plan = make_plan(*op, po);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
}

// An empty dimension is not bad input: no rows or columns give an empty output, an empty
// contraction gives zeros (the check poisons the output first and wants exact zeros).
TEST(EmptyDimensions, HostBackendsGiveZerosOrNothing) {
  std::uint64_t seed = 1;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const auto cases = verify::empty_dimension_cases(dt);
    ASSERT_EQ(cases.size(), 6u);
    for (const verify::Case& c : cases) {
      for (const char* backend : {"cpu_ref", "cpu", "padded"}) {
        PlanOptions po;
        po.backend = backend;
        const auto r = verify::check_case(c, po, seed++);
        EXPECT_TRUE(r.passed) << backend << " " << c.description << ": " << r.message << "\n  " << r.plan;
      }
    }
  }
}

}  // namespace
}  // namespace ragdot
