// Plans one MoE GEMM on a backend, runs it on the shared operands and times it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "moe_case.hpp"
#include "operand_set.hpp"
#include "ragdot/plan.hpp"
#include "timing.hpp"

namespace ragdot::cli {

struct MeasureRequest {
  std::string backend;  // a registry name, or empty for the automatic choice
  std::optional<MemorySpace> memory_space;  // picks among backends of one name (padded: host or GPU)
  TimingOptions host_timing;
  TimingOptions device_timing;
  bool keep_output = false;  // download the output of the last run (for the check)
};

struct BackendMeasurement {
  std::string backend;  // the backend that planned it
  std::string variant;
  std::string plan_line;
  MemorySpace space = MemorySpace::kHost;
  Timing timing;
  DType out_dtype = DType::kF32;
  std::vector<unsigned char> output;  // host copy of out when keep_output
};

// Timing that suits each side: a few runs on the host, where one run of a real layer takes long
// enough to time by itself; more and batched runs on a GPU. `reps` > 0 overrides the count.
MeasureRequest default_measure_request(std::string backend, int reps = 0);

// The padded baseline is planned dropless with its workspace sized for the largest group.
Result<BackendMeasurement> measure_backend(const MoeGemmCase& gemm, OperandSet& operands, const MeasureRequest& request);

}  // namespace ragdot::cli
