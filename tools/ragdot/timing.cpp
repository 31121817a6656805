#include "timing.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

namespace ragdot::cli {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Result<Timing> time_median(const std::function<Status()>& run, const std::function<Status()>& wait,
                           const TimingOptions& options) {
  double warm_seconds = 0.0;
  for (int i = 0; i < std::max(options.warmup, 1); ++i) {
    const double start = now_seconds();
    RAGDOT_RETURN_IF_ERROR(run());
    RAGDOT_RETURN_IF_ERROR(wait());
    warm_seconds = now_seconds() - start;
  }
  Timing t;
  if (options.min_sample_seconds > 0 && warm_seconds < options.min_sample_seconds) {
    const double runs = std::ceil(options.min_sample_seconds / std::max(warm_seconds, 1e-7));
    t.runs_per_sample = int(std::min(runs, 10000.0));
  }
  std::vector<double> samples;
  for (int i = 0; i < std::max(options.reps, 1); ++i) {
    const double start = now_seconds();
    for (int r = 0; r < t.runs_per_sample; ++r) RAGDOT_RETURN_IF_ERROR(run());
    RAGDOT_RETURN_IF_ERROR(wait());
    samples.push_back((now_seconds() - start) / t.runs_per_sample);
  }
  std::sort(samples.begin(), samples.end());
  t.samples = int(samples.size());
  t.min_seconds = samples.front();
  const std::size_t mid = samples.size() / 2;
  t.median_seconds = samples.size() % 2 ? samples[mid] : 0.5 * (samples[mid - 1] + samples[mid]);
  return t;
}

}  // namespace ragdot::cli
