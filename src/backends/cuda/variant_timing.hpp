// Times candidate plans of one problem on the device (PlanningEffort::kMeasure): each candidate is
// planned, run on trial operands of the problem's shapes (uniform values, never all zeros; group
// sizes as given), timed with CUDA events in interleaved rounds (median of one execute, as a
// caller would launch it), then run once more into a poisoned output that must agree with the
// planner's choice's. A candidate that cannot be planned, fails, or disagrees is not chosen.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "backends/cuda/device.hpp"
#include "backends/cuda/variant_candidates.hpp"
#include "planner/backend.hpp"

namespace ragdot::cuda {

using PlanMaker = std::function<Result<std::unique_ptr<detail::BackendPlan>>(const KernelVariant&)>;

struct TrialTiming {
  double us = -1.0;  // median time of one execute; < 0: not timed or rejected (`note` says why)
  std::string note;
};

// One TrialTiming per candidate, in order. An error when the trial cannot run at all (the planner's
// choice cannot be planned, device memory for the operands cannot be had, the device faults).
// `group_sizes`: one row of the problem's group sizes (num_groups entries), repeated across any
// batch rows.
Result<std::vector<TrialTiming>> time_candidates(const Device& device, const core::GroupGemmProblem& p,
                                                 const std::vector<Candidate>& candidates,
                                                 const std::vector<std::int64_t>& group_sizes, const PlanMaker& make);

// How far two outputs of the same product disagree: the largest |a - b| / (|b| + rms(b)) over the
// elements (infinite where one is NaN and the other not), both stored as `dtype`.
double output_disagreement(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b, DType dtype);

}  // namespace ragdot::cuda
