// PlanningEffort::kMeasure for the cuda backend: the fastest of a problem's candidate variants
// (variant_candidates.hpp) on this device, from the tuning cache (tuning_cache.hpp) or timed now
// (variant_timing.hpp), with the description a plan gives of the choice.
#pragma once

#include <string>
#include <vector>

#include "backends/cuda/variant_timing.hpp"

namespace ragdot::cuda {

struct MeasuredChoice {
  KernelVariant variant;
  // "measured=swap=ab(0.81x of 4)": the winning lever's RAGDOT_CUDA_VARIANT setting ("planner"
  // when none won), its time over the planner's choice's, the candidates timed; then
  // ",1 dropped" for candidates that failed or disagreed, ",cached" when read back.
  std::string description;
};

// `chosen`: the planner's choice for `p`. `given_sizes`: PlanOptions::measure_group_sizes (empty:
// the ragged extent split evenly). `make` plans one candidate (unchecked, for the trial). A trial
// that cannot run (no device memory for the operands, a failing planner's choice) keeps `chosen`
// and says why; that is remembered in memory, so the process does not try again.
Result<MeasuredChoice> measured_variant(const core::GroupGemmProblem& p, const Device& device, const KernelVariant& chosen,
                                        const std::vector<std::int64_t>& given_sizes, const PlanMaker& make);

}  // namespace ragdot::cuda
