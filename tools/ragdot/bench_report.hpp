// The results of `ragdot bench`: one record per (case, backend), written as JSON and drawn as a
// grouped bar chart of TFLOP/s (one group per case, one bar per backend).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend_measure.hpp"
#include "bar_chart.hpp"
#include "moe_case.hpp"
#include "sample_check.hpp"

namespace ragdot::cli {

struct BenchRecord {
  std::size_t case_index = 0;  // into BenchResults::cases
  std::string backend;         // as asked for on the command line
  std::optional<BackendMeasurement> measured;
  std::optional<SampleCheck> check;  // unset with --no-check
  std::string error;                 // why there is no measurement
};

struct BenchResults {
  DType dtype = DType::kBF16;
  std::uint64_t seed = 1;
  std::vector<std::string> backends;
  std::vector<MoeGemmCase> cases;
  std::vector<BenchRecord> records;

  const BenchRecord* find(std::size_t case_index, const std::string& backend) const;
};

// {"tool": "ragdot bench", "version", "timestamp", "machine": {...}, "dtype", "seed",
//  "backends": [...], "results": [{model, gemm, tokens, skew, shrink, m, k, n, groups,
//  active_groups, largest_group, useful_flops, min_bytes, backend, variant, plan, memory,
//  median_seconds, min_seconds, samples, runs_per_sample, tflops, gbps, check, error}, ...]}
std::string bench_json(const BenchResults& results);

BarChart bench_chart(const BenchResults& results);

}  // namespace ragdot::cli
