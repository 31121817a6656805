#include "backends/cublas/plan_traits.hpp"

namespace ragdot::cublas {

PlanTraits plan_traits(RaggedMode mode, GemmCall call, const Status& device_shapes) {
  PlanTraits t;
  t.variant = call == GemmCall::kGroupedBatched ? "grouped-batched-ex host-shapes" : "gemm-ex-loop host-shapes";
  t.needs_host_sync = mode != RaggedMode::kBatch;
  t.graph_safe = false;
  t.variant += device_shapes.is_ok() ? "; device-shape grouped matmul available"
                                     : "; device-shape grouped matmul unavailable: " + device_shapes.message();
  return t;
}

}  // namespace ragdot::cublas
