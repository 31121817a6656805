// The cublas and GPU padded backends where there is no GPU: they report themselves unavailable
// with a reason and planning fails cleanly; the version gate of the device-shape grouped matmul;
// what a plan says about itself; and the host side of the cublas backend, its per-group GEMM list,
// run through a column-major GEMM interpreter on the host and compared with the oracle for every
// mode, layout and group pattern. Needs the CUDA toolkit's headers, not a GPU: label "cpu".
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backends/cpu/reference.hpp"
#include "backends/cublas/gemm_list.hpp"
#include "backends/cublas/grouped_lt_gate.hpp"
#include "backends/cublas/plan_traits.hpp"
#include "backends/cuda/device.hpp"
#include "backends/cuda/kernel_cache.hpp"
#include "core/group_sizes.hpp"
#include "verify/check.hpp"

namespace ragdot {
namespace {

using cublas::ColumnMajorGemm;
using cublas::GemmList;

bool have_gpu() { return cuda::device_count() > 0; }

TEST(CublasHost, BackendsReportUnavailableWithoutAGpu) {
  if (have_gpu()) GTEST_SKIP() << "a GPU is here";
  int device_padded = 0, cublas = 0;
  for (const auto& b : list_backends()) {
    if (b.name == "cublas") {
      ++cublas;
      EXPECT_FALSE(b.available);
      EXPECT_FALSE(b.detail.empty());
      EXPECT_EQ(b.memory_space, MemorySpace::kDevice);
    }
    if (b.name == "padded" && b.memory_space == MemorySpace::kDevice) {
      ++device_padded;
      EXPECT_FALSE(b.available);
      EXPECT_FALSE(b.automatic);
    }
  }
  EXPECT_EQ(cublas, 1);
  EXPECT_EQ(device_padded, 1);
  auto op = RaggedDot::ragged_dot(64, 32, 16, 4, DType::kBF16);
  ASSERT_TRUE(op.ok());
  PlanOptions po;
  po.backend = "cublas";
  auto plan = make_plan(*op, po);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kUnavailable) << plan.status().to_string();
  po.backend = "padded";
  po.memory_space = MemorySpace::kDevice;
  plan = make_plan(*op, po);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kUnavailable) << plan.status().to_string();
}

TEST(CublasHost, PaddedByNameStaysOnTheHost) {
  auto op = RaggedDot::ragged_dot(64, 32, 16, 4, DType::kF32);
  ASSERT_TRUE(op.ok());
  PlanOptions po;
  po.backend = "padded";
  auto plan = make_plan(*op, po);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->memory_space(), MemorySpace::kHost);
  po.memory_space = MemorySpace::kHost;
  plan = make_plan(*op, po);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->memory_space(), MemorySpace::kHost);
}

TEST(CublasHost, NeverChosenAheadOfTheOthersWithoutAGpu) {
  auto op = RaggedDot::ragged_dot(64, 32, 16, 4, DType::kF32);
  auto plan = make_plan(*op, {});
  ASSERT_TRUE(plan.ok());
  if (!have_gpu()) EXPECT_EQ(plan->backend(), "cpu");
  EXPECT_NE(plan->backend(), "padded");
  EXPECT_NE(plan->backend(), "cublas");
}

TEST(CublasHost, DeviceShapeGateNeedsNewHeadersHopperAndCublas134) {
  cublas::GroupedLtQuery q{130100, 130100, 9, 0, true};
  Status s = cublas::grouped_lt_device_shapes(q);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("headers"), std::string::npos) << s.message();
  q.header_version = 130200;
  s = cublas::grouped_lt_device_shapes(q);  // headers fine, cuBLAS 13.1 at run time
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("13.4.0"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("13.1.0"), std::string::npos) << s.message();
  q.runtime_version = 130399;
  EXPECT_FALSE(cublas::grouped_lt_device_shapes(q).is_ok());
  q.runtime_version = 130400;
  EXPECT_TRUE(cublas::grouped_lt_device_shapes(q).is_ok());
  q.cc_major = 8;
  EXPECT_FALSE(cublas::grouped_lt_device_shapes(q).is_ok());
  q.cc_major = 9;
  q.path_built = false;
  EXPECT_FALSE(cublas::grouped_lt_device_shapes(q).is_ok());
  // this build: the headers here are 13.1, so the path is reported unavailable on any device
  EXPECT_FALSE(cublas::grouped_lt_path_built());
}

TEST(CublasHost, PlanTraitsSayHostSyncAndNotGraphSafe) {
  const Status gate = cublas::grouped_lt_device_shapes({130100, 130100, 9, 0, false});
  for (RaggedMode mode : {RaggedMode::kNonContracting, RaggedMode::kContracting}) {
    auto t = cublas::plan_traits(mode, cublas::GemmCall::kGroupedBatched, gate);
    EXPECT_TRUE(t.needs_host_sync);
    EXPECT_FALSE(t.graph_safe);
    EXPECT_NE(t.variant.find("grouped-batched-ex host-shapes"), std::string::npos) << t.variant;
    EXPECT_NE(t.variant.find("device-shape grouped matmul unavailable"), std::string::npos) << t.variant;
  }
  auto batch = cublas::plan_traits(RaggedMode::kBatch, cublas::GemmCall::kGemmLoop, gate);
  EXPECT_FALSE(batch.needs_host_sync);  // ragged batch needs no group sizes
  EXPECT_FALSE(batch.graph_safe);
  EXPECT_NE(batch.variant.find("gemm-ex-loop"), std::string::npos);
}

// The grouped API counts GEMMs in an int, and the plan keeps host arrays of them: 2^16 batches of
// 2^16 groups (2^32 GEMMs) are not taken, with a reason; 2^8 x 2^8 are.
TEST(CublasHost, GemmCountsPastAnIntAreNotMapped) {
  auto problem = [](std::int64_t batches, std::int64_t groups) {
    auto op = RaggedDot::create(verify::batched_forward_spec(batches, 4, 8, 8, groups, DType::kBF16));
    EXPECT_TRUE(op.ok()) << op.status().to_string();
    return core::canonicalize(*op);
  };
  const Status huge = cublas::check_mappable(problem(1 << 16, 1 << 16));
  EXPECT_EQ(huge.code(), StatusCode::kUnsupported);
  EXPECT_NE(huge.message().find("GEMM count"), std::string::npos) << huge.message();
  const core::GroupGemmProblem fits = problem(1 << 8, 1 << 8);
  EXPECT_TRUE(cublas::check_mappable(fits).is_ok()) << cublas::check_mappable(fits).message();
  EXPECT_EQ(cublas::max_gemms(fits), 1 << 16);
}

TEST(CublasHost, ColumnMajorViews) {
  auto row_major = cublas::column_major_view(5, 7, 7, 1);  // [5, 7] row-major: read transposed
  ASSERT_TRUE(row_major);
  EXPECT_TRUE(row_major->transpose);
  EXPECT_EQ(row_major->ld, 7);
  auto col_major = cublas::column_major_view(5, 7, 1, 9);
  ASSERT_TRUE(col_major);
  EXPECT_FALSE(col_major->transpose);
  EXPECT_EQ(col_major->ld, 9);
  EXPECT_FALSE(cublas::column_major_view(5, 7, 14, 2));  // contiguous along neither
  EXPECT_FALSE(cublas::column_major_view(5, 7, 3, 1));   // rows overlap
  auto vector = cublas::column_major_view(1, 7, 0, 3);   // one row: its stride is never used
  ASSERT_TRUE(vector);
  EXPECT_EQ(vector->ld, 3);
  auto pitched = cublas::pitched_region({10, 4, 6, 8, 1});
  ASSERT_TRUE(pitched);
  EXPECT_EQ(pitched->width, 6);
  EXPECT_EQ(pitched->height, 4);
  EXPECT_EQ(pitched->pitch, 8);
}

// cuBLAS's GEMM semantics on the host, in double.
void interpret(const ColumnMajorGemm& g, const double* lhs, const double* rhs, double* out) {
  const double* a = (g.a_source == cublas::Source::kLhs ? lhs : rhs) + g.a_offset;
  const double* b = (g.b_source == cublas::Source::kLhs ? lhs : rhs) + g.b_offset;
  for (std::int64_t j = 0; j < g.n; ++j) {
    for (std::int64_t i = 0; i < g.m; ++i) {
      double sum = 0;
      for (std::int64_t l = 0; l < g.k; ++l) {
        const double av = g.trans_a ? a[l + i * g.lda] : a[i + l * g.lda];
        const double bv = g.trans_b ? b[j + l * g.ldb] : b[l + j * g.ldb];
        sum += av * bv;
      }
      out[g.c_offset + i + j * g.ldc] = sum;
    }
  }
}

std::vector<double> as_doubles(const void* data, DType dt, std::int64_t n) {
  std::vector<double> v(std::size_t(std::max<std::int64_t>(n, 1)));
  for (std::int64_t i = 0; i < n; ++i) v[std::size_t(i)] = cpu::load_as_double(data, dt, i);
  return v;
}

// Runs the case's GEMM list and zero blocks on the host; "" when it matches the oracle, "skip"
// when the cublas backend does not take the op, else why not.
std::string run_list(const verify::Case& c, std::uint64_t seed) {
  auto op = RaggedDot::create(c.spec);
  if (!op.ok()) return "invalid case: " + op.status().to_string();
  const core::GroupGemmProblem p = core::canonicalize(*op);
  if (!cublas::check_mappable(p).is_ok()) return "skip";
  const auto& s = c.spec;
  std::vector<unsigned char> lhs(s.lhs.num_bytes() + 1), rhs(s.rhs.num_bytes() + 1);
  verify::fill_random(lhs.data(), s.lhs.dtype, s.lhs.num_elements(), seed * 2 + 1);
  verify::fill_random(rhs.data(), s.rhs.dtype, s.rhs.num_elements(), seed * 2 + 2);
  const std::vector<unsigned char> gs = verify::encode_group_sizes(c);
  const std::int32_t offset = c.group_offset.value_or(0);
  auto ref = cpu::ReferenceEvaluator::create(*op, lhs.data(), rhs.data(), gs.data(), c.group_offset ? &offset : nullptr);
  if (!ref.ok()) return "reference: " + ref.status().to_string();

  std::vector<std::int64_t> starts;
  if (p.mode != RaggedMode::kBatch) {
    const std::int64_t rows = p.num_groups ? p.gs_elements / p.num_groups : 0;
    starts.resize(std::size_t(rows * (p.num_groups + 1)) + 1);
    Status st = core::compute_group_starts(gs.data(), p.gs_dtype, rows, p.num_groups, p.ragged_extent, starts.data());
    if (!st.is_ok()) return st.to_string();
  }
  GemmList list;
  list.gemms.reserve(std::size_t(cublas::max_gemms(p)));
  list.zeros.reserve(std::size_t(cublas::max_zero_blocks(p)));
  const auto* gemms_storage = list.gemms.data();
  Status st = cublas::build_gemm_list(p, starts.empty() ? nullptr : starts.data(), offset, list);
  if (!st.is_ok()) return st.to_string();
  if (list.gemms.data() != gemms_storage || list.gemms.size() > std::size_t(cublas::max_gemms(p)) ||
      list.zeros.size() > std::size_t(cublas::max_zero_blocks(p))) {
    return "the list outgrew the storage reserved at plan time";
  }
  const auto l = as_doubles(lhs.data(), s.lhs.dtype, s.lhs.num_elements());
  const auto r = as_doubles(rhs.data(), s.rhs.dtype, s.rhs.num_elements());
  const std::int64_t n_out = op->out().num_elements();
  std::vector<double> out(std::size_t(std::max<std::int64_t>(n_out, 1)), std::nan(""));
  for (const auto& z : list.zeros) {
    auto region = cublas::pitched_region(z);
    if (!region) return "a zero block is not a pitched region";
    for (std::int64_t h = 0; h < region->height; ++h)
      for (std::int64_t w = 0; w < region->width; ++w) out[std::size_t(region->offset + h * region->pitch + w)] = 0.0;
  }
  for (const auto& g : list.gemms) interpret(g, l.data(), r.data(), out.data());
  for (std::int64_t i = 0; i < n_out; ++i) {
    const double want = ref->at(i), got = out[std::size_t(i)];
    if (std::isnan(got)) return "element " + std::to_string(i) + " never written";
    if (std::abs(got - want) > 1e-9 * (1 + std::abs(want))) {
      return "element " + std::to_string(i) + ": " + std::to_string(got) + " != " + std::to_string(want);
    }
  }
  return "";
}

TEST(CublasHost, GemmListMatchesTheOracleOnShapedCases) {
  const verify::GroupPattern patterns[] = {verify::GroupPattern::kRandom,     verify::GroupPattern::kZeros,
                                           verify::GroupPattern::kAllInOne,   verify::GroupPattern::kPartialSum,
                                           verify::GroupPattern::kAllEmpty,   verify::GroupPattern::kPrimes};
  workloads::SplitMix64 rng(7);
  std::uint64_t seed = 1;
  for (int mode = 1; mode <= 3; ++mode) {
    for (auto pat : patterns) {
      const std::int64_t m = 37, k = 19, n = 23, g = 5;
      const std::int64_t extent = mode == 1 ? m : mode == 2 ? k : 4;
      auto gs = verify::make_group_sizes(pat, mode == 3 ? 3 : g, extent, rng);
      auto c = verify::shaped_case(mode, m, k, n, gs, DType::kF32);
      ASSERT_TRUE(c.ok());
      const std::string why = run_list(*c, seed++);
      EXPECT_EQ(why, "") << c->description << " " << verify::group_pattern_name(pat);
    }
  }
  // mode 1 with [g, n, k] weights and with a group offset
  verify::Case nk;
  nk.spec.lhs = {DType::kF32, {41, 12}};
  nk.spec.rhs = {DType::kF32, {3, 9, 12}};
  nk.spec.group_sizes = {DType::kI32, {3}};
  nk.spec.dims.dot = {{1}, {2}, {}, {}};
  nk.spec.dims.lhs_ragged = {0};
  nk.spec.dims.rhs_group = {0};
  nk.group_sizes = {10, 0, 25};
  EXPECT_EQ(run_list(nk, 99), "");
  verify::Case off;
  off.spec.lhs = {DType::kF32, {50, 8}};
  off.spec.rhs = {DType::kF32, {2, 8, 6}};
  off.spec.group_sizes = {DType::kI32, {5}};
  off.spec.dims = RaggedDotDimensionNumbers::ragged_dot();
  off.spec.group_offset = GroupOffset{2};
  off.group_sizes = {5, 7, 11, 13, 3};
  off.group_offset = 2;
  EXPECT_EQ(run_list(off, 100), "");
}

TEST(CublasHost, GemmListMatchesTheOracleOnRandomCases) {
  int ran = 0;
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    verify::CaseOptions o;
    o.max_dim = 12;
    o.dtype = DType::kF32;
    auto c = verify::random_case(seed, o);
    const std::string why = run_list(c, seed);
    if (why == "skip") continue;
    ++ran;
    EXPECT_EQ(why, "") << "seed " << seed << ": " << c.description;
  }
  EXPECT_GE(ran, 100);
}

TEST(CublasHost, PaddedCopyKernelsCompile) {
  if (cuda::nvrtc_version().empty()) GTEST_SKIP() << "no NVRTC here";
  for (const char* arch : {"sm_80", "sm_90a"}) {
    auto k = cuda::KernelCache::instance().get("#include \"ragdot/padded_copy.cuh\"\n", "ragdot_padded.cu", arch);
    ASSERT_TRUE(k.ok()) << arch << ": " << k.status().to_string();
    EXPECT_FALSE((*k)->cubin.empty());
  }
}

}  // namespace
}  // namespace ragdot
