// cpu_ref: the oracle as a backend. Obviously correct, float64 accumulation, slow by design.
#include "backends/cpu/reference.hpp"
#include "planner/builtin_backends.hpp"

namespace ragdot::planner {

namespace {

class CpuRefPlan final : public detail::BackendPlan {
 public:
  explicit CpuRefPlan(const RaggedDot& op) : op_(op) {
    variant = "float64-loops";
    memory_space = MemorySpace::kHost;
    graph_safe = false;
    needs_host_sync = false;
  }
  Status execute(const ExecuteArgs& a) const override {
    auto ev = cpu::ReferenceEvaluator::create(op_, a.lhs.data, a.rhs.data, a.group_sizes.data, a.group_offset.data);
    if (!ev.ok()) return ev.status();
    const std::int64_t n = op_.out().num_elements();
    for (std::int64_t i = 0; i < n; ++i) cpu::store_from_double(a.out.data, op_.out().dtype, i, ev->at(i));
    return Status::ok();
  }

 private:
  RaggedDot op_;
};

class CpuRefBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu_ref"; }
  MemorySpace memory_space() const override { return MemorySpace::kHost; }
  Status available() const override { return Status::ok(); }
  std::string describe() const override { return "reference loops, float64 accumulation"; }
  Result<std::unique_ptr<detail::BackendPlan>> plan(const PlanRequest& r) const override {
    return std::unique_ptr<detail::BackendPlan>(new CpuRefPlan(r.op));
  }
};

}  // namespace

const Backend& cpu_ref_backend() {
  static const CpuRefBackend b;
  return b;
}

}  // namespace ragdot::planner
