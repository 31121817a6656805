// The cublas backend and the GPU padded baseline on a GPU, against the oracle: every mode x dtype x
// layout x group pattern (zeros, odd sizes, all in one group, sum < extent), outputs poisoned
// first; group offsets and batch dims; bad group sizes rejected before anything is written; what
// a plan says (host sync, not graph-safe); the padded baseline dropless and with a capacity factor
// (dropped-row count). Label "gpu": skipped (not failed) where there is no GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "backends/cpu/reference.hpp"
#include "gpu_test_support.hpp"
#include "verify/check.hpp"

namespace ragdot {
namespace {

using gpu_test::gpu;
using gpu_test::kPatterns;
using gpu_test::weights_nk;

PlanOptions options_for(const std::string& backend) {
  PlanOptions po;
  po.backend = backend;
  po.memory_space = MemorySpace::kDevice;
  return po;
}

void expect_pass(const std::string& backend, const verify::Case& c, std::uint64_t seed) {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = verify::check_case(c, options_for(backend), seed, *gpu());
  std::fprintf(stderr, "  [%s %.2fs] %s | %s\n", r.passed ? "ok" : "FAIL",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), c.description.c_str(),
               r.plan.c_str());
  EXPECT_TRUE(r.passed) << backend << ": " << c.description << "\n  " << r.plan << "\n  " << r.message;
}

struct Shape {
  std::int64_t m, k, n, g;
};

TEST(CublasBackend, ShapedCasesEveryModeDtypeLayout) {
  REQUIRE_GPU();
  const Shape shapes[] = {{300, 128, 136, 8}, {77, 64, 40, 5}, {213, 72, 264, 33}};
  workloads::SplitMix64 rng(3);
  std::uint64_t seed = 1;
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (DType out : {dt, DType::kF32}) {
      for (const Shape& sh : shapes) {
        for (auto pat : kPatterns) {
          for (int mode = 1; mode <= 3; ++mode) {
            const std::int64_t extent = mode == 1 ? sh.m : mode == 2 ? sh.k : 4;
            const std::int64_t groups = mode == 3 ? 3 : sh.g;
            auto c = verify::shaped_case(mode, sh.m, sh.k, sh.n, verify::make_group_sizes(pat, groups, extent, rng),
                                         dt, out);
            ASSERT_TRUE(c.ok()) << c.status().message();
            c->description += std::string(" ") + verify::group_pattern_name(pat);
            expect_pass("cublas", *c, seed++);
          }
          expect_pass("cublas", weights_nk(sh.m, sh.k, sh.n, verify::make_group_sizes(pat, sh.g, sh.m, rng), dt, out),
                      seed++);
        }
      }
    }
  }
}

TEST(CublasBackend, GroupOffsetBatchDimsAndRandomCases) {
  REQUIRE_GPU();
  verify::Case off;
  off.spec.lhs = {DType::kBF16, {900, 128}};
  off.spec.rhs = {DType::kBF16, {2, 128, 256}};
  off.spec.group_sizes = {DType::kI32, {5}};
  off.spec.dims = RaggedDotDimensionNumbers::ragged_dot();
  off.spec.group_offset = GroupOffset{2};
  off.group_sizes = {100, 150, 300, 200, 150};
  off.group_offset = 2;
  off.description = "mode1 group offset 2 of 5, 2 local";
  expect_pass("cublas", off, 7);

  workloads::SplitMix64 rng(5);
  verify::Case b;
  b.spec.lhs = {DType::kF32, {3, 40, 16}};
  b.spec.rhs = {DType::kF32, {3, 4, 16, 24}};
  b.spec.group_sizes = {DType::kI64, {3, 4}};
  b.spec.dims.dot = {{2}, {2}, {0}, {0}};
  b.spec.dims.lhs_ragged = {1};
  b.spec.dims.rhs_group = {1};
  for (int r = 0; r < 3; ++r) {
    auto row = verify::make_group_sizes(verify::GroupPattern::kPartialSum, 4, 40, rng);
    b.group_sizes.insert(b.group_sizes.end(), row.begin(), row.end());
  }
  b.description = "batched with [b, g] group sizes";
  expect_pass("cublas", b, 8);

  int ran = 0;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    verify::CaseOptions o;
    o.max_dim = 40;
    auto c = verify::random_case(seed, o);
    auto r = verify::check_case(c, options_for("cublas"), seed, *gpu());
    if (r.message.rfind("unsupported", 0) == 0) continue;  // relayouts, mixed dtypes
    ++ran;
    EXPECT_TRUE(r.passed) << "seed " << seed << ": " << c.description << "\n  " << r.plan << "\n  " << r.message;
  }
  EXPECT_GE(ran, 50);
}

// Operands of a small mode-1 op on the GPU.
struct DeviceOp {
  std::int64_t m, k, n, g;
  RaggedDot op;
  std::vector<float> lhs, rhs;
  void *dl = nullptr, *dr = nullptr, *dg = nullptr, *dout = nullptr, *dws = nullptr;
  DeviceOp(std::int64_t m_, std::int64_t k_, std::int64_t n_, std::int64_t g_)
      : m(m_), k(k_), n(n_), g(g_), op(RaggedDot::ragged_dot(m_, k_, n_, g_, DType::kF32).value()),
        lhs(std::size_t(m * k)), rhs(std::size_t(g * k * n)) {
    verify::fill_random(lhs.data(), DType::kF32, m * k, 1);
    verify::fill_random(rhs.data(), DType::kF32, g * k * n, 2);
    dl = gpu()->alloc(lhs.size() * 4).value();
    dr = gpu()->alloc(rhs.size() * 4).value();
    dg = gpu()->alloc(std::size_t(g) * 4).value();
    dout = gpu()->alloc(std::size_t(m * n) * 4).value();
    EXPECT_TRUE(gpu()->upload(dl, lhs.data(), lhs.size() * 4).is_ok());
    EXPECT_TRUE(gpu()->upload(dr, rhs.data(), rhs.size() * 4).is_ok());
  }
  ~DeviceOp() {
    for (void* p : {dl, dr, dg, dout, dws}) gpu()->free(p);
  }
  // Uploads sizes and a poisoned output, runs, downloads.
  Status run(const Plan& plan, const std::vector<std::int32_t>& gs, std::vector<float>& out, ExecuteReport* report) {
    if (!dws) dws = gpu()->alloc(plan.workspace_bytes() + 64).value();
    out.assign(std::size_t(m * n), std::nanf(""));
    RAGDOT_RETURN_IF_ERROR(gpu()->upload(dg, gs.data(), gs.size() * 4));
    RAGDOT_RETURN_IF_ERROR(gpu()->upload(dout, out.data(), out.size() * 4));
    ExecuteArgs a;
    a.lhs = {dl, lhs.size() * 4, MemorySpace::kDevice};
    a.rhs = {dr, rhs.size() * 4, MemorySpace::kDevice};
    a.group_sizes = {dg, gs.size() * 4, MemorySpace::kDevice};
    a.out = {dout, out.size() * 4, MemorySpace::kDevice};
    a.workspace = {dws, plan.workspace_bytes(), MemorySpace::kDevice};
    a.stream = gpu()->stream();
    a.report = report;
    const Status st = plan.execute(a);
    RAGDOT_RETURN_IF_ERROR(gpu()->synchronize());
    RAGDOT_RETURN_IF_ERROR(gpu()->download(out.data(), dout, out.size() * 4));
    return st;
  }
};

TEST(CublasBackend, PlanSaysHostSyncNotGraphSafeAndReportsTheBridge) {
  REQUIRE_GPU();
  DeviceOp d(600, 64, 96, 4);
  auto plan = make_plan(d.op, options_for("cublas"));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_TRUE(plan->needs_host_sync());
  EXPECT_FALSE(plan->graph_safe());
  const std::string line = plan->to_string();
  EXPECT_NE(line.find("needs_host_sync=yes"), std::string::npos) << line;
  EXPECT_NE(line.find("graph_safe=no"), std::string::npos) << line;
  // cuBLAS 13.1 on the test machine: the device-shape path must say it is unavailable
  EXPECT_NE(line.find("device-shape grouped matmul"), std::string::npos) << line;
  std::fprintf(stderr, "  %s\n", line.c_str());
  ExecuteReport report;
  std::vector<float> out;
  ASSERT_TRUE(d.run(*plan, {100, 0, 300, 150}, out, &report).is_ok());
  EXPECT_GT(report.host_bridge_ms, 0.0);
  std::fprintf(stderr, "  host bridge %.3f ms\n", report.host_bridge_ms);
}

TEST(CublasBackend, RejectsBadGroupSizesWithoutWriting) {
  REQUIRE_GPU();
  DeviceOp d(200, 32, 48, 3);
  auto plan = make_plan(d.op, options_for("cublas"));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  for (const std::vector<std::int32_t>& bad : {std::vector<std::int32_t>{50, -1, 10}, {150, 60, 0}}) {
    std::vector<float> out;
    const Status st = d.run(*plan, bad, out, nullptr);
    EXPECT_FALSE(st.is_ok());
    for (float v : out) ASSERT_TRUE(std::isnan(v)) << "the output was written although the sizes were rejected";
  }
}

TEST(PaddedGpu, DroplessMatchesReference) {
  REQUIRE_GPU();
  workloads::SplitMix64 rng(1);
  std::uint64_t seed = 1;
  for (int mode : {1, 2}) {
    for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (auto pat : kPatterns) {
        auto gs = verify::make_group_sizes(pat, 5, mode == 1 ? 170 : 190, rng);
        auto c = verify::shaped_case(mode, 170, 190, 72, gs, dt);
        ASSERT_TRUE(c.ok());
        c->description += std::string(" ") + verify::group_pattern_name(pat);
        expect_pass("padded", *c, seed++);
      }
    }
  }
  auto plan = make_plan(RaggedDot::ragged_dot(64, 32, 16, 4, DType::kBF16).value(), options_for("padded"));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->memory_space(), MemorySpace::kDevice);
  EXPECT_TRUE(plan->needs_host_sync());
  EXPECT_NE(plan->variant().find("dropless"), std::string::npos) << plan->variant();
}

TEST(PaddedGpu, CapacityFactorDropsRowsAndCountsThem) {
  REQUIRE_GPU();
  DeviceOp d(20, 4, 3, 2);
  PlanOptions po = options_for("padded");
  po.padded_capacity_factor = 1.0;  // capacity = ceil(20 / 2) = 10
  auto plan = make_plan(d.op, po);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_FALSE(plan->needs_host_sync());
  const std::vector<std::int32_t> gs{14, 6};  // group 0 loses 4 rows
  ExecuteReport report;
  std::vector<float> out;
  ASSERT_TRUE(d.run(*plan, gs, out, &report).is_ok());
  EXPECT_EQ(report.capacity, 10);
  EXPECT_EQ(report.dropped_rows, 4);
  auto ref = cpu::ReferenceEvaluator::create(d.op, d.lhs.data(), d.rhs.data(), gs.data());
  ASSERT_TRUE(ref.ok());
  for (std::int64_t r = 0; r < d.m; ++r) {
    const bool dropped = r >= 10 && r < 14;
    for (std::int64_t c = 0; c < d.n; ++c) {
      const float o = out[std::size_t(r * d.n + c)];
      if (dropped) EXPECT_EQ(o, 0.0f) << "dropped row " << r;
      else EXPECT_NEAR(o, ref->at(r * d.n + c), 1e-5) << "row " << r;
    }
  }
  // without a report the plan runs with no host sync: same output
  std::vector<float> again;
  ASSERT_TRUE(d.run(*plan, gs, again, nullptr).is_ok());
  EXPECT_EQ(std::memcmp(out.data(), again.data(), out.size() * 4), 0);
}

TEST(PaddedGpu, DroplessNeedsRoomForTheLargestGroup) {
  REQUIRE_GPU();
  DeviceOp d(20, 4, 3, 2);
  PlanOptions po = options_for("padded");
  po.padded_max_group_rows = 8;
  auto plan = make_plan(d.op, po);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  std::vector<float> out;
  const Status st = d.run(*plan, {12, 8}, out, nullptr);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("largest group has 12 rows"), std::string::npos) << st.to_string();
  for (float v : out) ASSERT_TRUE(std::isnan(v));
}

}  // namespace
}  // namespace ragdot
