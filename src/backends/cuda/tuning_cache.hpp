// Measured plans' choices (PlanningEffort::kMeasure), kept so that a problem is timed once per
// device: in memory, and on disk as <RAGDOT_CACHE_DIR>/tuning/<key>.txt, a short text file that
// says which candidate won and what each took. The key hashes the problem, the device, the
// candidates and the kernels' sources, so a change to any of them is measured afresh. Entries are
// published whole (atomic_file.hpp); one that does not parse, or whose checksum or key does not
// match, is measured again, never trusted; a cache directory that cannot be written keeps them in
// memory only.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace ragdot::cuda {

struct TuningRecord {
  std::string key;
  struct Timing {
    std::string name;   // KernelVariant::name()
    std::string spec;   // its RAGDOT_CUDA_VARIANT override ("" for the planner's choice)
    double us = -1.0;   // median time of one execute; < 0: not timed (`note` says why)
    std::string note;
  };
  std::vector<Timing> timings;  // the planner's choice first
  int chosen = 0;               // index into timings (on disk, always a timed one)
};

// The record as the disk entry's text, and back (nullopt for anything malformed or mis-keyed).
std::string format_tuning_record(const TuningRecord& r);
std::optional<TuningRecord> parse_tuning_record(const std::string& text, const std::string& key);

class TuningCache {
 public:
  static TuningCache& instance();
  // The key of one measurement: the problem's and device's descriptions and the candidates' names
  // (every field hashed with its length), and the kernels' embedded sources.
  static std::string key_for(const std::vector<std::string>& fields);
  std::string entry_path(const std::string& key) const;
  // From memory, else from disk (checked); nullopt when there is no valid entry.
  std::optional<TuningRecord> find(const std::string& key);
  // Into memory, and onto disk where it can be written; false when only in memory.
  bool store(const TuningRecord& r);
  // Into memory only (a trial that could not run: the process keeps the planner's choice).
  void remember(const TuningRecord& r);
  void clear_memory();

 private:
  TuningCache() = default;
  std::mutex mu_;
  std::unordered_map<std::string, TuningRecord> memory_;
};

}  // namespace ragdot::cuda
