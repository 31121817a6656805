// Median wall time of a repeated operation, after warm-up runs.
#pragma once

#include <functional>

#include "ragdot/status.hpp"

namespace ragdot::cli {

struct TimingOptions {
  int warmup = 1;
  int reps = 3;
  // A GPU execute returns before the work is done, and a short one is swamped by launch and sync
  // cost: each sample then runs the operation back to back until it takes at least this long.
  double min_sample_seconds = 0.0;
};

struct Timing {
  double median_seconds = 0.0;
  double min_seconds = 0.0;
  int samples = 0;
  int runs_per_sample = 1;
};

// `run` enqueues one operation; `wait` blocks until all enqueued ones are done.
Result<Timing> time_median(const std::function<Status()>& run, const std::function<Status()>& wait,
                           const TimingOptions& options);

double now_seconds();

}  // namespace ragdot::cli
