// cpu: the embedded default. Every (outer index, group) becomes one GEMM task; the GemmDriver runs
// them on the best kernels of this CPU (AMX-BF16, AVX512_BF16, AVX-512 f32, or portable C++).
// Group sizes are read and checked on the host before anything is written.
#include <algorithm>

#include "backends/cpu/cpu_features.hpp"
#include "backends/cpu/gemm_driver.hpp"
#include "backends/cpu/relayout.hpp"
#include "core/env.hpp"
#include "core/group_sizes.hpp"
#include "planner/builtin_backends.hpp"

namespace ragdot::planner {

namespace {

using cpu::GemmTask;

constexpr std::size_t kAlign = 64;
std::size_t align_up(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

const cpu::kernels::IsaKernels* pick_kernels(DType lhs, DType rhs, cpu::Isa isa) {
  using namespace cpu::kernels;
  const bool bf16 = lhs == DType::kBF16 && rhs == DType::kBF16;
  if (bf16 && isa == cpu::Isa::kAmx) return &amx_bf16_kernels();
  if (bf16 && isa >= cpu::Isa::kAvx512Bf16) return &avx512_bf16_kernels();
  if (isa >= cpu::Isa::kAvx512) return &avx512_f32_kernels();
  return &scalar_kernels();
}

// Byte offsets of the pieces of the workspace.
struct WorkspaceLayout {
  std::size_t starts = 0, tasks = 0, lhs_gather = 0, lhs_copy = 0, rhs_copy = 0, scratch = 0, total = 0;
};

class CpuPlan final : public detail::BackendPlan {
 public:
  CpuPlan(const core::GroupGemmProblem& p, const cpu::kernels::IsaKernels* isa, int threads) : p_(p), threads_(threads) {
    memory_space = MemorySpace::kHost;
    graph_safe = false;
    needs_host_sync = false;

    lhs_outer_.reserve(p.outer.size());
    for (const auto& o : p.outer) lhs_outer_.push_back(o.lhs);
    lhs_m_ = p.lhs_m;
    lhs_k_ = p.lhs_k;
    lhs_elements_ = p.lhs_relayout ? p.lhs_relayout->elements() : p.lhs_elements;
    // Mode 2 on gathered rows: execute first copies the rows through the index into a dense
    // [k, m] lhs (lhs_k = m: the planner takes only a contiguous 2-D lhs), then goes on as usual.
    gather_dense_ = p.lhs_gather_rows && p.mode == RaggedMode::kContracting;
    if (gather_dense_) lhs_elements_ = p.k * p.m;
    // Mode 2 reads lhs^T: give the micro-kernels contiguous k by transposing lhs once per execute.
    if (p.mode == RaggedMode::kContracting && p.lhs_k != 1 && p.m > 1) {
      core::Relayout t;
      for (const auto& o : p.outer) {
        t.sizes.push_back(o.size);
        t.src_strides.push_back(o.lhs);
      }
      t.sizes.push_back(p.m);
      t.src_strides.push_back(p.lhs_m);
      t.sizes.push_back(p.k);
      t.src_strides.push_back(p.lhs_k);
      std::int64_t stride = p.m * p.k;
      for (std::size_t i = p.outer.size(); i-- > 0;) {
        lhs_outer_[i] = stride;
        stride *= p.outer[i].size;
      }
      lhs_m_ = p.k;
      lhs_k_ = 1;
      lhs_transpose_ = std::move(t);
    }

    max_tasks_ = p.outer_count() * p.gemms_per_outer();  // (CpuBackend::plan checked its bytes)
    const std::int64_t typical_m = p.mode == RaggedMode::kNonContracting && p.computed_groups > 0
                                       ? std::max<std::int64_t>(p.m / p.computed_groups, 1)
                                       : p.m;
    driver_ = cpu::GemmDriver(isa, p.lhs_dtype, p.rhs_dtype, p.out_dtype, p.n, p.k, typical_m, threads,
                              p.lhs_gather_rows.has_value() && !gather_dense_);

    gs_rows_ = p.num_groups > 0 ? p.gs_elements / p.num_groups : 0;
    ws_.starts = 0;
    ws_.tasks = align_up(std::size_t(gs_rows_ * (p.num_groups + 1)) * 8);
    ws_.lhs_gather = ws_.tasks + align_up(std::size_t(max_tasks_) * sizeof(GemmTask));
    ws_.lhs_copy = ws_.lhs_gather + align_up(gather_dense_ ? std::size_t(p.k * p.m) * dtype_size(p.lhs_dtype) : 0);
    std::size_t lhs_copy_bytes = 0;
    if (p.lhs_relayout) lhs_copy_bytes = std::size_t(p.lhs_relayout->elements()) * dtype_size(p.lhs_dtype);
    if (lhs_transpose_) lhs_copy_bytes = std::size_t(lhs_transpose_->elements()) * dtype_size(p.lhs_dtype);
    ws_.rhs_copy = ws_.lhs_copy + align_up(lhs_copy_bytes);
    const std::size_t rhs_copy_bytes =
        p.rhs_relayout ? std::size_t(p.rhs_relayout->elements()) * dtype_size(p.rhs_dtype) : 0;
    ws_.scratch = ws_.rhs_copy + align_up(rhs_copy_bytes);
    ws_.total = ws_.scratch + align_up(driver_.scratch_bytes(max_tasks_));
    workspace_bytes = ws_.total;

    const auto& b = driver_.blocking();
    variant = std::string(isa->name) + " nb=" + std::to_string(b.nb) + " kc=" + std::to_string(b.kc) +
              " mchunk=" + std::to_string(b.m_chunk) +
              " threads=" + std::to_string(b.threads);
    if (p.lhs_relayout || lhs_transpose_) variant += " +lhs-copy";
    if (p.lhs_gather_rows) variant += " +gathered-lhs";
    if (p.rhs_relayout) variant += " +rhs-copy";
  }

  Status execute(const ExecuteArgs& a) const override {
    char* ws = static_cast<char*>(a.workspace.data);
    auto* starts = reinterpret_cast<std::int64_t*>(ws + ws_.starts);
    // 1. check group sizes and offset before touching the output
    if (p_.mode != RaggedMode::kBatch || p_.num_groups > 0) {
      RAGDOT_RETURN_IF_ERROR(core::compute_group_starts(a.group_sizes.data, p_.gs_dtype, gs_rows_, p_.num_groups,
                                                        p_.ragged_extent, starts));
    }
    std::int64_t offset = 0;
    if (p_.has_group_offset) {
      RAGDOT_RETURN_IF_ERROR(core::read_group_offset(a.group_offset.data, p_.computed_groups, p_.num_groups, offset));
    }
    // An empty output has nothing to write (and its buffer may be null).
    if (p_.out_elements == 0) return Status::ok();
    // 2. copies into canonical layouts
    const char* lhs = static_cast<const char*>(a.lhs.data);
    const char* rhs = static_cast<const char*>(a.rhs.data);
    if (gather_dense_) {  // (rows of a contiguous 2-D lhs: the table's rows are m elements apart too)
      cpu::gather_rows(lhs, *p_.lhs_gather_rows, std::size_t(p_.m) * dtype_size(p_.lhs_dtype),
                       static_cast<const std::int32_t*>(a.lhs_rows.data), p_.k, ws + ws_.lhs_gather);
      lhs = ws + ws_.lhs_gather;
    }
    if (const core::Relayout* r = p_.lhs_relayout ? &*p_.lhs_relayout : lhs_transpose_ ? &*lhs_transpose_ : nullptr) {
      cpu::relayout(lhs, dtype_size(p_.lhs_dtype), *r, ws + ws_.lhs_copy, threads_);
      lhs = ws + ws_.lhs_copy;
    }
    if (p_.rhs_relayout) {
      cpu::relayout(rhs, dtype_size(p_.rhs_dtype), *p_.rhs_relayout, ws + ws_.rhs_copy, threads_);
      rhs = ws + ws_.rhs_copy;
    }
    // 3. one task per (outer index, non-empty group); zero what no group writes
    auto* tasks = reinterpret_cast<GemmTask*>(ws + ws_.tasks);
    std::int64_t count = 0;
    const std::size_t les = dtype_size(p_.lhs_dtype), res = dtype_size(p_.rhs_dtype), oes = dtype_size(p_.out_dtype);
    char* out = static_cast<char*>(a.out.data);
    const auto& K = driver_.isa();
    const std::int64_t outer_count = p_.outer_count();
    const std::int64_t unit = p_.ragged_unit;
    for (std::int64_t oi = 0; oi < outer_count; ++oi) {
      std::int64_t lo = 0, ro = 0, co = 0, go = 0, rem = oi;
      for (std::size_t d = p_.outer.size(); d-- > 0;) {
        const std::int64_t i = rem % p_.outer[d].size;
        rem /= p_.outer[d].size;
        lo += i * lhs_outer_[d];
        ro += i * p_.outer[d].rhs;
        co += i * p_.outer[d].out;
        go += i * p_.outer[d].gs;
      }
      const std::int64_t row = p_.num_groups > 0 ? go / p_.num_groups : 0;
      const std::int64_t* rs = starts + row * (p_.num_groups + 1);
      char* obase = out + std::size_t(co) * oes;
      switch (p_.mode) {
        case RaggedMode::kNonContracting: {
          const std::int64_t L = p_.computed_groups;
          const std::int64_t first = L ? rs[offset] * unit : 0, last = L ? rs[offset + L] * unit : 0;
          K.zero(first, p_.n, {obase, p_.out_m, p_.out_n, p_.out_dtype});
          K.zero(p_.m - last, p_.n, {obase + std::size_t(last * p_.out_m) * oes, p_.out_m, p_.out_n, p_.out_dtype});
          for (std::int64_t j = 0; j < L; ++j) {
            const std::int64_t s = rs[offset + j] * unit, e = rs[offset + j + 1] * unit;
            if (e <= s) continue;
            const void* rj = rhs + std::size_t(ro + j * p_.rhs_g) * res;
            void* oj = obase + std::size_t(s * p_.out_m) * oes;
            if (p_.lhs_gather_rows) {  // rows [s, e) are table rows lhs_rows[s..e)
              tasks[count++] = GemmTask{lhs, lhs_m_, 1, rj, p_.rhs_k, p_.rhs_n, oj, p_.out_m, p_.out_n, e - s, p_.k,
                                        0, static_cast<const std::int32_t*>(a.lhs_rows.data) + s,
                                        *p_.lhs_gather_rows};
              continue;
            }
            const std::int64_t a_off = lo + s * lhs_m_;
            const std::int64_t readable =
                lhs_m_ > 0 && lhs_k_ == 1 ? (lhs_elements_ - 1 - a_off - (p_.k - 1)) / lhs_m_ + 1 : 0;
            tasks[count++] = GemmTask{lhs + std::size_t(a_off) * les, lhs_m_, lhs_k_, rj, p_.rhs_k, p_.rhs_n, oj,
                                      p_.out_m, p_.out_n, e - s, p_.k, readable};
          }
          break;
        }
        case RaggedMode::kContracting: {
          for (std::int64_t j = 0; j < p_.computed_groups; ++j) {
            const std::int64_t s = rs[offset + j] * unit, e = rs[offset + j + 1] * unit;
            char* cj = obase + std::size_t(j * p_.out_g) * oes;
            if (e <= s) {
              K.zero(p_.m, p_.n, {cj, p_.out_m, p_.out_n, p_.out_dtype});
              continue;
            }
            tasks[count++] = GemmTask{lhs + std::size_t(lo + s * lhs_k_) * les, lhs_m_, lhs_k_,
                                      rhs + std::size_t(ro + s * p_.rhs_k) * res, p_.rhs_k, p_.rhs_n,
                                      cj, p_.out_m, p_.out_n, p_.m, e - s};
          }
          break;
        }
        case RaggedMode::kBatch:
          tasks[count++] = GemmTask{lhs + std::size_t(lo) * les, lhs_m_, lhs_k_, rhs + std::size_t(ro) * res, p_.rhs_k,
                                    p_.rhs_n, obase, p_.out_m, p_.out_n, p_.m, p_.k};
          break;
      }
    }
    // 4. run
    driver_.run(tasks, count, ws + ws_.scratch);
    return Status::ok();
  }

 private:
  core::GroupGemmProblem p_;
  int threads_;
  std::vector<std::int64_t> lhs_outer_;
  bool gather_dense_ = false;
  std::int64_t lhs_m_ = 0, lhs_k_ = 0, lhs_elements_ = 0;
  std::optional<core::Relayout> lhs_transpose_;
  std::int64_t max_tasks_ = 0, gs_rows_ = 0;
  cpu::GemmDriver driver_;
  WorkspaceLayout ws_;
};

class CpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }
  MemorySpace memory_space() const override { return MemorySpace::kHost; }
  bool gathers_lhs_rows() const override { return true; }
  Status available() const override { return Status::ok(); }
  std::string describe() const override {
    return cpu::describe_cpu() + ", " + std::to_string(env::num_threads()) + " threads";
  }
  Result<std::unique_ptr<detail::BackendPlan>> plan(const PlanRequest& r) const override {
    const auto& p = r.problem;
    if (!p.reduce.empty()) {
      return unsupported("contracting dimensions listed ahead of the ragged contracting dimension (group sizes that "
                         "vary along a contracted dimension)");
    }
    if (!cpu::task_bytes_fit(p.outer_count(), p.gemms_per_outer())) {
      return resource_exhausted(std::to_string(p.outer_count()) + " batch indices x " +
                                std::to_string(p.gemms_per_outer()) +
                                " groups are too many GEMM tasks to size a workspace for");
    }
    const int threads = r.options.num_threads > 0 ? r.options.num_threads : env::num_threads();
    const auto* isa = pick_kernels(p.lhs_dtype, p.rhs_dtype, cpu::best_isa());
    return std::unique_ptr<detail::BackendPlan>(new CpuPlan(p, isa, threads));
  }
};

}  // namespace

const Backend& cpu_backend() {
  static const CpuBackend b;
  return b;
}

}  // namespace ragdot::planner
