#include "sample_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "element_values.hpp"
#include "memory_buffer.hpp"
#include "ragdot/plan.hpp"
#include "verify/check.hpp"

namespace ragdot::cli {

namespace {

constexpr std::int64_t kRowsPerEnd = 4;     // rows from the start and from the end of a group
constexpr std::int64_t kMaxColumns = 160;

std::vector<std::int64_t> pick_groups(const std::vector<std::int64_t>& sizes) {
  std::vector<std::int64_t> active;
  for (std::size_t g = 0; g < sizes.size(); ++g) {
    if (sizes[g] > 0) active.push_back(std::int64_t(g));
  }
  if (active.empty()) return {};
  std::int64_t largest = active.front();
  for (auto g : active) {
    if (sizes[std::size_t(g)] > sizes[std::size_t(largest)]) largest = g;
  }
  std::vector<std::int64_t> picked = {active.front(), largest, active.back()};
  std::sort(picked.begin(), picked.end());
  picked.erase(std::unique(picked.begin(), picked.end()), picked.end());
  return picked;
}

}  // namespace

std::string SampleCheck::summary() const {
  char buf[256];
  if (!message.empty()) {
    std::snprintf(buf, sizeof buf, "FAILED: %s", message.c_str());
  } else {
    std::snprintf(buf, sizeof buf, "passed (relative error %.2e <= %.2e on %lld rows x %lld columns of %lld groups)",
                  rel_error, tolerance, (long long)rows, (long long)cols, (long long)groups);
  }
  return buf;
}

SampleCheck check_sample(const MoeGemmCase& gemm, const OperandSet& operands, const std::vector<unsigned char>& out,
                         DType out_dtype) {
  SampleCheck check;
  check.tolerance = verify::tolerance_for(out_dtype, gemm.k);
  const std::vector<std::int64_t> groups = pick_groups(gemm.group_sizes);
  if (groups.empty() || gemm.n == 0) {
    check.passed = true;  // no row belongs to a group: nothing is computed
    return check;
  }
  std::vector<std::int64_t> starts(gemm.group_sizes.size() + 1, 0);
  for (std::size_t g = 0; g < gemm.group_sizes.size(); ++g) starts[g + 1] = starts[g] + gemm.group_sizes[g];

  // sampled rows (global indices) and the size of each sampled group
  std::vector<std::int64_t> rows, sample_sizes;
  for (auto g : groups) {
    const std::int64_t begin = starts[std::size_t(g)], size = gemm.group_sizes[std::size_t(g)];
    std::int64_t taken = 0;
    for (std::int64_t r = 0; r < size; ++r) {
      if (r < kRowsPerEnd || r >= size - kRowsPerEnd) {
        rows.push_back(begin + r);
        ++taken;
      }
    }
    sample_sizes.push_back(taken);
  }
  const std::int64_t ncols = std::min(gemm.n, kMaxColumns);
  std::vector<std::int64_t> cols(std::size_t(ncols), 0);
  for (std::int64_t j = 1; j < ncols; ++j) cols[std::size_t(j)] = j * (gemm.n - 1) / (ncols - 1);
  check.rows = std::int64_t(rows.size());
  check.cols = ncols;
  check.groups = std::int64_t(groups.size());

  // the sampled sub-problem: lhs [rows, k], rhs [groups, k, cols]
  const std::size_t es = dtype_size(gemm.dtype);
  const std::int64_t R = check.rows, K = gemm.k, G = check.groups;
  std::vector<unsigned char> lhs(std::size_t(R * K) * es + 1), rhs(std::size_t(G * K * ncols) * es + 1);
  const auto* full_lhs = static_cast<const unsigned char*>(operands.host_lhs());
  const auto* full_rhs = static_cast<const unsigned char*>(operands.host_rhs());
  for (std::int64_t i = 0; i < R; ++i) {
    std::memcpy(&lhs[std::size_t(i * K) * es], full_lhs + std::size_t(rows[std::size_t(i)] * K) * es, std::size_t(K) * es);
  }
  for (std::int64_t gi = 0; gi < G; ++gi) {
    const unsigned char* w = full_rhs + std::size_t(groups[std::size_t(gi)] * K * gemm.n) * es;
    for (std::int64_t kk = 0; kk < K; ++kk) {
      for (std::int64_t j = 0; j < ncols; ++j) {
        std::memcpy(&rhs[std::size_t((gi * K + kk) * ncols + j) * es], w + std::size_t(kk * gemm.n + cols[std::size_t(j)]) * es, es);
      }
    }
  }
  std::vector<std::int32_t> sizes(sample_sizes.begin(), sample_sizes.end());

  // The reference writes f32, so that its own rounding does not eat into the tolerance.
  auto op = RaggedDot::ragged_dot(R, K, ncols, G, gemm.dtype, DType::kF32);
  if (!op.ok()) {
    check.message = "the sampled problem is invalid: " + op.status().to_string();
    return check;
  }
  PlanOptions options;
  options.backend = "cpu_ref";
  auto plan = make_plan(*op, options);
  if (!plan.ok()) {
    check.message = "cpu_ref: " + plan.status().to_string();
    return check;
  }
  std::vector<float> ref(std::size_t(R * ncols));
  auto workspace = MemoryBuffer::allocate(verify::host_memory(), plan->workspace_bytes());
  if (!workspace.ok()) {
    check.message = workspace.status().to_string();
    return check;
  }
  ExecuteArgs args;
  args.lhs = {lhs.data(), std::size_t(R * K) * es};
  args.rhs = {rhs.data(), std::size_t(G * K * ncols) * es};
  args.group_sizes = {sizes.data(), sizes.size() * 4};
  args.out = {ref.data(), ref.size() * 4};
  args.workspace = workspace->as_mutable();
  if (Status st = plan->execute(args); !st.is_ok()) {
    check.message = "cpu_ref: " + st.to_string();
    return check;
  }

  double err2 = 0, ref2 = 0;
  for (std::int64_t i = 0; i < R; ++i) {
    for (std::int64_t j = 0; j < ncols; ++j) {
      const double expected = ref[std::size_t(i * ncols + j)];
      const std::int64_t index = rows[std::size_t(i)] * gemm.n + cols[std::size_t(j)];
      const double got = element_as_double(out.data(), out_dtype, index);
      if (!std::isfinite(got)) {
        check.message = "output [" + std::to_string(rows[std::size_t(i)]) + ", " + std::to_string(cols[std::size_t(j)]) +
                        "] is " + (std::isnan(got) ? "NaN (never written, or wrong)" : "infinite");
        return check;
      }
      err2 += (got - expected) * (got - expected);
      ref2 += expected * expected;
    }
  }
  check.rel_error = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  if (!(check.rel_error <= check.tolerance)) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "relative error %.3e exceeds %.3e on %lld rows x %lld columns", check.rel_error,
                  check.tolerance, (long long)R, (long long)ncols);
    check.message = buf;
    return check;
  }
  check.passed = true;
  return check;
}

}  // namespace ragdot::cli
