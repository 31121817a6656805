// What a cublas plan says about itself, as a pure function of its choices so that it is tested
// where no plan can be made (no GPU).
#pragma once

#include <string>

#include "ragdot/op.hpp"
#include "ragdot/status.hpp"

namespace ragdot::cublas {

enum class GemmCall : std::uint8_t {
  kGroupedBatched,  // cublasGemmGroupedBatchedEx: one call, host shapes, device pointer arrays
  kGemmLoop,        // one cublasGemmEx per group: dtype pairs the grouped API lacks
};

struct PlanTraits {
  std::string variant;
  bool needs_host_sync = true;
  bool graph_safe = false;
};

// `device_shapes`: the verdict of the device-shape gate (grouped_lt_device_shapes). Mode 3 needs
// no group sizes (every batch element is one GEMM), so it needs no host sync either way; its
// per-execute pointer upload still keeps it out of CUDA graphs.
PlanTraits plan_traits(RaggedMode mode, GemmCall call, const Status& device_shapes);

}  // namespace ragdot::cublas
