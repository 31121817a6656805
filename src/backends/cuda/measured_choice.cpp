#include "backends/cuda/measured_choice.hpp"

#include <cstdio>
#include <mutex>
#include <sstream>

#include "backends/cuda/nvrtc_compiler.hpp"
#include "backends/cuda/tuning_cache.hpp"
#include "core/env.hpp"
#include "ragdot/version.hpp"

namespace ragdot::cuda {

namespace {

// A candidate must beat the planner's choice by this much to be chosen: closer is noise.
constexpr double kWinMargin = 0.98;

// One row of group sizes to measure with: the caller's, or the ragged extent split evenly.
std::vector<std::int64_t> trial_group_sizes(const core::GroupGemmProblem& p, const std::vector<std::int64_t>& given) {
  if (!given.empty()) return given;
  std::vector<std::int64_t> sizes(std::size_t(p.num_groups), 0);
  for (std::int64_t g = 0; g < p.num_groups; ++g)
    sizes[std::size_t(g)] = p.ragged_extent / p.num_groups + (g < p.ragged_extent % p.num_groups ? 1 : 0);
  return sizes;
}

// Everything the right choice depends on: the problem (every stride of it), the device, the
// compiler, the library, the sizes, and each candidate's generated source and override.
std::vector<std::string> key_fields(const core::GroupGemmProblem& p, const Device& device,
                                    const std::vector<Candidate>& candidates, const std::vector<std::int64_t>& sizes) {
  std::ostringstream problem;
  problem << p.to_string() << " dtypes " << dtype_name(p.lhs_dtype) << ',' << dtype_name(p.rhs_dtype) << "->"
          << dtype_name(p.out_dtype) << " gs " << dtype_name(p.gs_dtype) << " gs_elements " << p.gs_elements
          << " gather " << p.lhs_gather_rows.value_or(-1) << " offset " << p.has_group_offset;
  for (const auto& o : p.outer) problem << " outer " << o.size << ':' << o.lhs << ',' << o.rhs << ',' << o.out << ',' << o.gs;
  for (const auto& o : p.reduce) problem << " reduce " << o.size << ':' << o.lhs << ',' << o.rhs << ',' << o.out << ',' << o.gs;
  std::ostringstream rows;
  for (std::int64_t g : sizes) rows << g << ',';
  std::vector<std::string> fields = {problem.str(), device.describe(), nvrtc_build(), version_string(), rows.str()};
  for (const auto& c : candidates) {
    fields.push_back(c.spec);
    fields.push_back(generate_source(c.variant));
  }
  return fields;
}

std::string describe(const TuningRecord& r, bool cached) {
  const auto& best = r.timings[std::size_t(r.chosen)];
  if (best.us < 0) return "measured=planner(not measured: " + best.note + ")";
  int dropped = 0;
  for (const auto& t : r.timings) dropped += t.us < 0;
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.2fx", best.us / r.timings[0].us);
  std::ostringstream s;
  s << "measured=" << (best.spec.empty() ? "planner" : best.spec.c_str()) << '(' << ratio << " of " << r.timings.size();
  if (dropped) s << ',' << dropped << " dropped";
  s << (cached ? ",cached)" : ")");
  return s.str();
}

// The candidate a record chose, if it is still one of `candidates`.
const Candidate* recorded_choice(const TuningRecord& r, const std::vector<Candidate>& candidates) {
  const auto& best = r.timings[std::size_t(r.chosen)];
  for (const auto& c : candidates)
    if (c.variant.name() == best.name && c.spec == best.spec) return &c;
  return nullptr;
}

}  // namespace

Result<MeasuredChoice> measured_variant(const core::GroupGemmProblem& p, const Device& device, const KernelVariant& chosen,
                                        const std::vector<std::int64_t>& given_sizes, const PlanMaker& make) {
  const std::vector<Candidate> candidates = candidate_variants(p, device.traits, chosen);
  if (candidates.size() < 2 || p.num_groups == 0) return MeasuredChoice{chosen, "measured=planner(no alternates)"};
  const std::vector<std::int64_t> sizes = trial_group_sizes(p, given_sizes);
  auto& cache = TuningCache::instance();
  const std::string key = TuningCache::key_for(key_fields(p, device, candidates, sizes));
  if (std::optional<TuningRecord> r = cache.find(key))
    if (const Candidate* c = recorded_choice(*r, candidates)) return MeasuredChoice{c->variant, describe(*r, true)};
  // One trial at a time in the process: two at once would share the device's memory and time,
  // and keep a choice skewed by each other. The second finds the first's choice.
  static std::mutex trial_mutex;
  std::lock_guard<std::mutex> lock(trial_mutex);
  if (std::optional<TuningRecord> r = cache.find(key))
    if (const Candidate* c = recorded_choice(*r, candidates)) return MeasuredChoice{c->variant, describe(*r, true)};
  if (env::print_plan())
    std::fprintf(stderr, "ragdot: measuring %zu candidate kernels for %s\n", candidates.size(), p.to_string().c_str());
  TuningRecord record;
  record.key = key;
  auto timings = time_candidates(device, p, candidates, sizes, make);
  if (!timings.ok()) {
    // the planner's choice, unmeasured; remembered in memory only (another process may fare better)
    record.timings.push_back({chosen.name(), "", -1.0, timings.status().message()});
    cache.remember(record);
    return MeasuredChoice{chosen, describe(record, false)};
  }
  for (std::size_t i = 0; i < candidates.size(); ++i)
    record.timings.push_back({candidates[i].variant.name(), candidates[i].spec, (*timings)[i].us, (*timings)[i].note});
  for (std::size_t i = 1; i < record.timings.size(); ++i) {
    const double us = record.timings[i].us, best = record.timings[std::size_t(record.chosen)].us;
    if (us > 0 && us < best && us < kWinMargin * record.timings[0].us) record.chosen = int(i);
  }
  cache.store(record);
  if (env::print_plan()) {
    for (std::size_t i = 0; i < record.timings.size(); ++i) {
      const auto& t = record.timings[i];
      std::fprintf(stderr, "ragdot:   %s %-16s %10.1f us  %s%s%s\n", int(i) == record.chosen ? "*" : " ",
                   t.spec.empty() ? "(planner)" : t.spec.c_str(), t.us, t.name.c_str(), t.note.empty() ? "" : "  ",
                   t.note.c_str());
    }
  }
  return MeasuredChoice{candidates[std::size_t(record.chosen)].variant, describe(record, false)};
}

}  // namespace ragdot::cuda
