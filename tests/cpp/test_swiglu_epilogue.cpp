// The SwiGLU epilogue (PlanOptions::swiglu_epilogue): a mode 1 plan whose output is the [M, N / 2]
// activation silu(gate) * up of its product's [gate | up] halves, each rounded to the output dtype
// first. Here: cpu_ref against the product of a plain plan with SwiGLU applied by hand, the
// planner's checks, the backends that are and are not offered such plans, and the out buffer's
// size. The cuda backend's epilogue is checked on a GPU in test_cuda_backend (HopperSwiglu...).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/reference.hpp"
#include "ragdot/plan.hpp"
#include "verify/check.hpp"

namespace ragdot {
namespace {

// lhs [m, k], rhs [g, k, n] (n = 2 ffn), out [m, n] of `out` dtype.
RaggedDotSpec spec_of(std::int64_t m, std::int64_t k, std::int64_t n, std::int64_t g, DType dt, DType out) {
  RaggedDotSpec s{{dt, {m, k}}, {dt, {g, k, n}}, {DType::kI32, {g}}, RaggedDotDimensionNumbers::ragged_dot(),
                  std::nullopt, std::nullopt};
  s.preferred_element_type = out;
  return s;
}

std::vector<unsigned char> random_bytes(DType dt, std::int64_t count, std::uint64_t seed) {
  std::vector<unsigned char> v(std::size_t(count) * dtype_size(dt));
  workloads::SplitMix64 rng(seed);
  for (std::int64_t i = 0; i < count; ++i) cpu::store_from_double(v.data(), dt, i, 4.0 * rng.uniform() - 2.0);
  return v;
}

// Runs `plan` on host buffers; out is poisoned (NaN) first and holds `out_elements`.
std::vector<unsigned char> run(const Plan& plan, const std::vector<unsigned char>& lhs,
                               const std::vector<unsigned char>& rhs, const std::vector<std::int32_t>& gs,
                               std::int64_t out_elements, DType out) {
  std::vector<unsigned char> y(std::size_t(out_elements) * dtype_size(out));
  for (std::int64_t i = 0; i < out_elements; ++i) cpu::store_from_double(y.data(), out, i, std::nan(""));
  ExecuteArgs a;
  a.lhs = {lhs.data(), lhs.size()};
  a.rhs = {rhs.data(), rhs.size()};
  a.group_sizes = {gs.data(), gs.size() * 4};
  a.out = {y.data(), y.size()};
  const Status st = plan.execute(a);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return y;
}

// cpu_ref's epilogue against the plain product with SwiGLU applied here, element by element in
// f32 from the stored (rounded) gate and up: the same bits. Rows past the groups are zeros.
TEST(SwigluEpilogue, CpuRefAppliesSwigluToTheStoredProduct) {
  const std::int64_t m = 50, k = 24, ffn = 20, n = 2 * ffn;
  const std::vector<std::int32_t> gs{20, 0, 17, 3};  // 40 of 50 rows
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (DType out : {dt, DType::kF32}) {
      auto op = RaggedDot::create(spec_of(m, k, n, 4, dt, out));
      ASSERT_TRUE(op.ok()) << op.status().to_string();
      PlanOptions plain_options;
      plain_options.backend = "cpu_ref";
      PlanOptions fused_options = plain_options;
      fused_options.swiglu_epilogue = true;
      auto plain = make_plan(*op, plain_options);
      auto fused = make_plan(*op, fused_options);
      ASSERT_TRUE(plain.ok()) << plain.status().to_string();
      ASSERT_TRUE(fused.ok()) << fused.status().to_string();
      EXPECT_NE(fused->to_string().find("swiglu-epilogue"), std::string::npos) << fused->to_string();
      const auto lhs = random_bytes(dt, m * k, 1), rhs = random_bytes(dt, 4 * k * n, 2);
      const auto product = run(*plain, lhs, rhs, gs, m * n, out);
      const auto act = run(*fused, lhs, rhs, gs, m * ffn, out);
      std::vector<unsigned char> want(act.size());
      for (std::int64_t r = 0; r < m; ++r) {
        for (std::int64_t c = 0; c < ffn; ++c) {
          const float g = float(cpu::load_as_double(product.data(), out, r * n + c));
          const float u = float(cpu::load_as_double(product.data(), out, r * n + ffn + c));
          cpu::store_from_double(want.data(), out, r * ffn + c, g / (1.0f + std::exp(-g)) * u);
        }
      }
      EXPECT_EQ(act, want) << dtype_name(dt) << " -> " << dtype_name(out);
      for (std::int64_t i = 40 * ffn; i < m * ffn; ++i) ASSERT_EQ(cpu::load_as_double(act.data(), out, i), 0.0) << i;
    }
  }
}

// The check the GPU tests use (verify::check_case with Case::swiglu) passes cpu_ref, on every
// group pattern.
TEST(SwigluEpilogue, TheCheckOfGpuTestsPassesTheOracleBackend) {
  workloads::SplitMix64 rng(5);
  std::uint64_t seed = 1;
  for (auto pattern : {verify::GroupPattern::kRandom, verify::GroupPattern::kZeros, verify::GroupPattern::kAllInOne,
                       verify::GroupPattern::kPartialSum, verify::GroupPattern::kAllEmpty}) {
    auto c = verify::shaped_case(1, 37, 16, 48, verify::make_group_sizes(pattern, 3, 37, rng), DType::kBF16);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    c->swiglu = true;
    PlanOptions po;
    po.backend = "cpu_ref";
    const auto r = verify::check_case(*c, po, seed++);
    EXPECT_TRUE(r.passed) << verify::group_pattern_name(pattern) << ": " << r.message << "\n  " << r.plan;
  }
}

TEST(SwigluEpilogue, PlannerTakesOnlyAModeOneProductWithGateAndUpHalves) {
  PlanOptions po;
  po.backend = "cpu_ref";
  po.swiglu_epilogue = true;
  // an odd number of columns has no halves
  auto odd = RaggedDot::create(spec_of(16, 8, 7, 2, DType::kF32, DType::kF32));
  ASSERT_TRUE(odd.ok());
  auto st = make_plan(*odd, po).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find("odd"), std::string::npos) << st.to_string();
  // mode 2 (ragged contracting) and mode 3 (ragged batch)
  for (int mode : {2, 3}) {
    auto made = verify::shaped_case(mode, 16, 8, 6, {8, 8}, DType::kF32, DType::kF32);
    ASSERT_TRUE(made.ok()) << made.status().to_string();
    auto other = RaggedDot::create(made->spec);
    ASSERT_TRUE(other.ok());
    st = make_plan(*other, po).status();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "mode " << mode << ": " << st.to_string();
  }
}

TEST(SwigluEpilogue, BackendsWithoutTheEpilogueAreNotChosen) {
  auto op = RaggedDot::create(spec_of(16, 8, 8, 2, DType::kF32, DType::kF32));
  ASSERT_TRUE(op.ok());
  PlanOptions po;
  po.memory_space = MemorySpace::kHost;
  po.swiglu_epilogue = true;
  auto plan = make_plan(*op, po);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->backend(), "cpu_ref");  // cpu, first among the host backends, has no epilogue
  for (const char* named : {"cpu", "padded"}) {
    po.backend = named;
    auto refused = make_plan(*op, po);
    EXPECT_EQ(refused.status().code(), StatusCode::kUnsupported) << named;
    EXPECT_NE(refused.status().message().find("SwiGLU"), std::string::npos) << refused.status().message();
  }
}

// out holds M x N / 2 elements: fewer is an error that writes nothing; exactly that many runs.
TEST(SwigluEpilogue, ExecuteWantsTheActivationsSizeOfOut) {
  const std::int64_t m = 16, k = 8, n = 8;
  auto op = RaggedDot::create(spec_of(m, k, n, 2, DType::kF32, DType::kF32));
  ASSERT_TRUE(op.ok());
  PlanOptions po;
  po.backend = "cpu_ref";
  po.swiglu_epilogue = true;
  auto plan = make_plan(*op, po);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  std::vector<float> lhs(m * k, 0.5f), rhs(2 * k * n, 0.25f), out(m * n / 2, -7.0f);
  std::vector<std::int32_t> gs{8, 8};
  ExecuteArgs a;
  a.lhs = {lhs.data(), lhs.size() * 4};
  a.rhs = {rhs.data(), rhs.size() * 4};
  a.group_sizes = {gs.data(), gs.size() * 4};
  a.out = {out.data(), (out.size() - 1) * 4};
  const Status st = plan->execute(a);
  EXPECT_FALSE(st.is_ok());
  for (float v : out) ASSERT_EQ(v, -7.0f);
  a.out = {out.data(), out.size() * 4};
  ASSERT_TRUE(plan->execute(a).is_ok());
  const float g = 8 * 0.5f * 0.25f;  // every product element is 1
  for (float v : out) EXPECT_FLOAT_EQ(v, g / (1.0f + std::exp(-g)) * g);
}

}  // namespace
}  // namespace ragdot
