// cpu_ref: the oracle as a backend. Obviously correct, float64 accumulation, slow by design.
// Gathered lhs rows (PlanOptions::lhs_gather_rows) are copied into a dense lhs first, so the
// evaluator itself never sees the index. The SwiGLU epilogue (PlanOptions::swiglu_epilogue) reads
// the evaluator's gate and up columns, each rounded to the output dtype, as a stored product is;
// the scatter-add of rows (PlanOptions::out_scatter_rows) adds each rounded row, scaled, into its
// table row in f32, rows in order.
#include <optional>
#include <vector>

#include "backends/cpu/reference.hpp"
#include "backends/cpu/relayout.hpp"
#include "planner/builtin_backends.hpp"

namespace ragdot::planner {

namespace {

class CpuRefPlan final : public detail::BackendPlan {
 public:
  CpuRefPlan(const RaggedDot& op, std::optional<std::int64_t> gather_rows, bool swiglu,
             std::optional<std::int64_t> scatter_rows)
      : op_(op), gather_rows_(gather_rows), swiglu_(swiglu), scatter_rows_(scatter_rows) {
    variant = "float64-loops";
    memory_space = MemorySpace::kHost;
    graph_safe = false;
    needs_host_sync = false;
  }
  Status execute(const ExecuteArgs& a) const override {
    const void* lhs = a.lhs.data;
    std::vector<unsigned char> gathered;
    if (gather_rows_) {
      const TensorSpec& spec = op_.spec().lhs;
      const std::size_t row_bytes = std::size_t(spec.shape[1]) * dtype_size(spec.dtype);
      gathered.resize(std::size_t(spec.shape[0]) * row_bytes);
      cpu::gather_rows(a.lhs.data, *gather_rows_, row_bytes, static_cast<const std::int32_t*>(a.lhs_rows.data),
                       spec.shape[0], gathered.data());
      lhs = gathered.data();
    }
    auto ev = cpu::ReferenceEvaluator::create(op_, lhs, a.rhs.data, a.group_sizes.data, a.group_offset.data);
    if (!ev.ok()) return ev.status();
    const DType out = op_.out().dtype;
    if (scatter_rows_) {
      const std::int64_t rows = op_.out().shape[0], n = op_.out().shape[1];
      const auto* index = static_cast<const std::int32_t*>(a.out_rows.data);
      const auto* scales = static_cast<const float*>(a.row_scales.data);
      auto* table = static_cast<float*>(a.out.data);
      double scratch = 0;  // one element of the output dtype, to round through
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t to = index[r];
        if (to < 0 || to >= *scatter_rows_) continue;
        for (std::int64_t c = 0; c < n; ++c) {
          cpu::store_from_double(&scratch, out, 0, ev->at(r * n + c));
          table[to * n + c] += float(cpu::load_as_double(&scratch, out, 0)) * scales[r];
        }
      }
      return Status::ok();
    }
    if (swiglu_) {
      // out [M, N] row-major (the planner's rule): act[r, c] from gate [r, c] and up [r, N / 2 + c]
      const std::int64_t rows = op_.out().shape[0], half = op_.out().shape[1] / 2;
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = 0; c < half; ++c) {
          const float act = cpu::swiglu_of_stored(ev->at(r * 2 * half + c), ev->at(r * 2 * half + half + c), out);
          cpu::store_from_double(a.out.data, out, r * half + c, act);
        }
      }
      return Status::ok();
    }
    const std::int64_t n = op_.out().num_elements();
    for (std::int64_t i = 0; i < n; ++i) cpu::store_from_double(a.out.data, out, i, ev->at(i));
    return Status::ok();
  }

 private:
  RaggedDot op_;
  std::optional<std::int64_t> gather_rows_;
  bool swiglu_;
  std::optional<std::int64_t> scatter_rows_;
};

class CpuRefBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu_ref"; }
  MemorySpace memory_space() const override { return MemorySpace::kHost; }
  Status available() const override { return Status::ok(); }
  std::string describe() const override { return "reference loops, float64 accumulation"; }
  bool gathers_lhs_rows() const override { return true; }
  bool fuses_swiglu() const override { return true; }
  bool scatters_out_rows() const override { return true; }
  Result<std::unique_ptr<detail::BackendPlan>> plan(const PlanRequest& r) const override {
    return std::unique_ptr<detail::BackendPlan>(
        new CpuRefPlan(r.op, r.problem.lhs_gather_rows, r.problem.swiglu_epilogue, r.problem.out_scatter_rows));
  }
};

}  // namespace

const Backend& cpu_ref_backend() {
  static const CpuRefBackend b;
  return b;
}

}  // namespace ragdot::planner
