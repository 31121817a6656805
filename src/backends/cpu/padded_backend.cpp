// padded: the capacity-padded baseline that a Group-GEMM beats. Rows are scattered into
// [groups, capacity, k], every group is multiplied at the full capacity (padding rows included,
// as a batched GEMM does), and the kept rows are gathered back. Capacity is the largest group
// (dropless) or ceil(factor * rows / groups), dropping the rows beyond it as MaxText's dropping
// path does. Runs on the same kernels as the cpu backend, so the difference is the padding alone.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_features.hpp"
#include "backends/cpu/gemm_driver.hpp"
#include "core/env.hpp"
#include "core/group_sizes.hpp"
#include "planner/builtin_backends.hpp"
#include "planner/padded_capacity.hpp"

namespace ragdot::planner {

namespace {

using cpu::GemmTask;
constexpr std::size_t kAlign = 64;
std::size_t align_up(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

const cpu::kernels::IsaKernels* kernels_for(DType lhs, DType rhs) {
  using namespace cpu::kernels;
  const cpu::Isa isa = cpu::best_isa();
  const bool bf16 = lhs == DType::kBF16 && rhs == DType::kBF16;
  if (bf16 && isa == cpu::Isa::kAmx) return &amx_bf16_kernels();
  if (bf16 && isa >= cpu::Isa::kAvx512Bf16) return &avx512_bf16_kernels();
  if (isa >= cpu::Isa::kAvx512) return &avx512_f32_kernels();
  return &scalar_kernels();
}

class PaddedCpuPlan final : public detail::BackendPlan {
 public:
  PaddedCpuPlan(const core::GroupGemmProblem& p, std::optional<double> factor, std::int64_t max_capacity, int threads)
      : p_(p), factor_(factor), max_capacity_(max_capacity) {
    memory_space = MemorySpace::kHost;
    const std::int64_t g = p.computed_groups;
    // mode 1: X [g, cap, k] (lhs dtype), Y [g, cap, n] (out dtype); mode 2: X^T [g, m, cap], dY [g, cap, n]
    const std::int64_t x_elems = g * max_capacity * (p.mode == RaggedMode::kNonContracting ? p.k : p.m);
    const std::int64_t y_elems = g * max_capacity * p.n;
    const std::int64_t kmax = p.mode == RaggedMode::kNonContracting ? p.k : max_capacity;
    driver_ = cpu::GemmDriver(kernels_for(p.lhs_dtype, p.rhs_dtype), p.lhs_dtype, p.rhs_dtype,
                              p.mode == RaggedMode::kNonContracting ? p.out_dtype : p.out_dtype, p.n, kmax,
                              p.mode == RaggedMode::kNonContracting ? max_capacity : p.m, threads);
    starts_ = 0;
    tasks_ = align_up(std::size_t(p.num_groups + 1) * 8);
    x_ = tasks_ + align_up(std::size_t(std::max<std::int64_t>(g, 1)) * sizeof(GemmTask));
    y_ = x_ + align_up(std::size_t(x_elems) * dtype_size(p.lhs_dtype));
    const DType ydt = p.mode == RaggedMode::kNonContracting ? p.out_dtype : p.rhs_dtype;
    scratch_ = y_ + align_up(std::size_t(y_elems) * dtype_size(ydt));
    workspace_bytes = scratch_ + align_up(driver_.scratch_bytes(std::max<std::int64_t>(g, 1)));
    variant = std::string(factor ? "capacity-factor" : "dropless") + " max_capacity=" + std::to_string(max_capacity) +
              " on " + driver_.isa().name;
  }

  Status execute(const ExecuteArgs& a) const override {
    char* ws = static_cast<char*>(a.workspace.data);
    auto* starts = reinterpret_cast<std::int64_t*>(ws + starts_);
    RAGDOT_RETURN_IF_ERROR(core::compute_group_starts(a.group_sizes.data, p_.gs_dtype, 1, p_.num_groups,
                                                      p_.ragged_extent, starts));
    std::int64_t offset = 0;
    if (p_.has_group_offset) {
      RAGDOT_RETURN_IF_ERROR(core::read_group_offset(a.group_offset.data, p_.computed_groups, p_.num_groups, offset));
    }
    const std::int64_t G = p_.computed_groups, unit = p_.ragged_unit;
    const std::int64_t rows_total = padded_rows(p_);
    std::int64_t largest = 0;
    for (std::int64_t j = 0; j < G; ++j) largest = std::max(largest, (starts[offset + j + 1] - starts[offset + j]) * unit);
    std::int64_t cap = factor_ ? capacity_for_factor(*factor_, rows_total, G) : largest;
    if (cap > max_capacity_) {
      if (!factor_) {
        return invalid_argument("the largest group has " + std::to_string(largest) +
                                " rows, more than the plan's padded_max_group_rows " + std::to_string(max_capacity_));
      }
      cap = max_capacity_;
    }
    const std::size_t les = dtype_size(p_.lhs_dtype), res = dtype_size(p_.rhs_dtype), oes = dtype_size(p_.out_dtype);
    const char* lhs = static_cast<const char*>(a.lhs.data);
    const char* rhs = static_cast<const char*>(a.rhs.data);
    char* out = static_cast<char*>(a.out.data);
    char* X = ws + x_;
    char* Y = ws + y_;
    auto* tasks = reinterpret_cast<GemmTask*>(ws + tasks_);
    std::int64_t dropped = 0;
    const auto& K = driver_.isa();

    if (p_.mode == RaggedMode::kNonContracting) {
      // scatter rows (padding rows are zero), batched GEMM at full capacity, gather kept rows
      for (std::int64_t j = 0; j < G; ++j) {
        const std::int64_t s = starts[offset + j] * unit, e = starts[offset + j + 1] * unit;
        const std::int64_t kept = std::min(e - s, cap);
        dropped += (e - s) - kept;
        for (std::int64_t r = 0; r < cap; ++r) {
          char* dst = X + std::size_t((j * cap + r) * p_.k) * les;
          if (p_.k == 0) {
            continue;  // empty rows: lhs and the workspace rows may be null
          } else if (r < kept && p_.lhs_k == 1) {
            std::memcpy(dst, lhs + std::size_t((s + r) * p_.lhs_m) * les, std::size_t(p_.k) * les);
          } else if (r < kept) {
            for (std::int64_t kk = 0; kk < p_.k; ++kk)
              std::memcpy(dst + kk * les, lhs + std::size_t((s + r) * p_.lhs_m + kk * p_.lhs_k) * les, les);
          } else {
            std::memset(dst, 0, std::size_t(p_.k) * les);
          }
        }
        tasks[j] = GemmTask{X + std::size_t(j * cap * p_.k) * les, p_.k, 1, rhs + std::size_t(j * p_.rhs_g) * res,
                            p_.rhs_k, p_.rhs_n, Y + std::size_t(j * cap * p_.n) * oes, p_.n, 1, cap, p_.k};
      }
      driver_.run(tasks, G, ws + scratch_);
      K.zero(p_.m, p_.n, {out, p_.out_m, p_.out_n, p_.out_dtype});
      // n == 0: the output has no elements and may be null; there is nothing to gather
      for (std::int64_t j = 0; j < G && p_.n > 0; ++j) {
        const std::int64_t s = starts[offset + j] * unit, e = starts[offset + j + 1] * unit;
        const std::int64_t kept = std::min(e - s, cap);
        for (std::int64_t r = 0; r < kept; ++r) {
          const char* src = Y + std::size_t((j * cap + r) * p_.n) * oes;
          char* dst = out + std::size_t((s + r) * p_.out_m) * oes;
          if (p_.out_n == 1) {
            std::memcpy(dst, src, std::size_t(p_.n) * oes);
          } else {
            for (std::int64_t c = 0; c < p_.n; ++c) std::memcpy(dst + std::size_t(c * p_.out_n) * oes, src + c * oes, oes);
          }
        }
      }
    } else {
      // mode 2: X^T [g, m, cap] and dY [g, cap, n], then dW[g] = X^T dY over the full capacity
      for (std::int64_t j = 0; j < G; ++j) {
        const std::int64_t s = starts[offset + j] * unit, e = starts[offset + j + 1] * unit;
        const std::int64_t kept = std::min(e - s, cap);
        dropped += (e - s) - kept;
        char* xt = X + std::size_t(j * p_.m * cap) * les;
        for (std::int64_t i = 0; i < p_.m; ++i) {
          for (std::int64_t r = 0; r < cap; ++r) {
            char* d = xt + std::size_t(i * cap + r) * les;
            if (r < kept) std::memcpy(d, lhs + std::size_t((s + r) * p_.lhs_k + i * p_.lhs_m) * les, les);
            else std::memset(d, 0, les);
          }
        }
        char* dy = Y + std::size_t(j * cap * p_.n) * res;
        for (std::int64_t r = 0; r < cap; ++r) {
          for (std::int64_t c = 0; c < p_.n; ++c) {
            char* d = dy + std::size_t(r * p_.n + c) * res;
            if (r < kept) std::memcpy(d, rhs + std::size_t((s + r) * p_.rhs_k + c * p_.rhs_n) * res, res);
            else std::memset(d, 0, res);
          }
        }
        tasks[j] = GemmTask{xt, cap, 1, dy, p_.n, 1, out + std::size_t(j * p_.out_g) * oes, p_.out_m, p_.out_n, p_.m, cap};
      }
      driver_.run(tasks, G, ws + scratch_);
    }
    if (a.report) {
      a.report->dropped_rows = dropped;
      a.report->capacity = cap;
    }
    return Status::ok();
  }

 private:
  core::GroupGemmProblem p_;
  std::optional<double> factor_;
  std::int64_t max_capacity_;
  cpu::GemmDriver driver_;
  std::size_t starts_ = 0, tasks_ = 0, x_ = 0, y_ = 0, scratch_ = 0;
};

class PaddedCpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "padded"; }
  MemorySpace memory_space() const override { return MemorySpace::kHost; }
  bool automatic() const override { return false; }
  Status available() const override { return Status::ok(); }
  std::string describe() const override { return "capacity-padded baseline on the cpu kernels (only when named)"; }
  Result<std::unique_ptr<detail::BackendPlan>> plan(const PlanRequest& r) const override {
    RAGDOT_ASSIGN_OR_RETURN(PaddedCapacity c, padded_capacity(r.problem, r.options));
    if (!cpu::task_bytes_fit(1, std::max<std::int64_t>(r.problem.computed_groups, 1))) {
      return resource_exhausted(std::to_string(r.problem.computed_groups) +
                                " groups are too many GEMM tasks to size a workspace for");
    }
    const int threads = r.options.num_threads > 0 ? r.options.num_threads : env::num_threads();
    return std::unique_ptr<detail::BackendPlan>(new PaddedCpuPlan(r.problem, c.factor, c.max_capacity, threads));
  }
};

}  // namespace

const Backend& padded_cpu_backend() {
  static const PaddedCpuBackend b;
  return b;
}

}  // namespace ragdot::planner
