// The kernel variants a measured plan (PlanningEffort::kMeasure) times for one problem: the
// planner's own choice first, then the alternates that can beat it on some shapes, each written
// as the RAGDOT_CUDA_VARIANT override that selects it (so a measured choice can be pinned).
#pragma once

#include <string>
#include <vector>

#include "backends/cuda/kernel_variant.hpp"

namespace ragdot::cuda {

struct Candidate {
  KernelVariant variant;
  std::string spec;  // "" for the planner's choice, else its override ("swap=ab")
};

// The planner's choice `chosen` for problem `p` on device `d`, then its alternates: the other tile
// width; for mode 1, swapped operands (groups of up to ~2 swapped tiles of rows), the last wave
// split along k, and mma.sync for decode-sized groups; for mode 2, strips and the TMA-store
// epilogue. Only variants all_variants lists (those CI compiles), no two alike.
std::vector<Candidate> candidate_variants(const core::GroupGemmProblem& p, const DeviceTraits& d,
                                          const KernelVariant& chosen);

}  // namespace ragdot::cuda
