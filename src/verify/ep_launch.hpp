// One process per rank for expert-parallel tests and benchmarks: runs a program once per rank with
// the bootstrap of ragdot/ep_transport.hpp in its environment (RAGDOT_EP_RANK, _WORLD_SIZE,
// _DEVICE, _ID_FILE) and NCCL_NVLS_ENABLE=0, and waits for them all.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ragdot/status.hpp"

namespace ragdot::verify {

struct RankLaunch {
  std::vector<std::string> argv;  // argv[0] is the program; "/proc/self/exe" runs this one again
  int world_size = 1;
  int gpus = 0;                   // > 0: rank r gets RAGDOT_EP_DEVICE = r % gpus
  std::string id_file;            // removed first; rank 0 writes the NCCL id there
  std::vector<std::pair<std::string, std::string>> env;  // more variables for every rank
  double timeout_s = 300;         // then the ranks still running are killed
};

// The exit status of every rank (128 + signal for a rank killed by a signal, 124 for one killed
// at the timeout); an error when a process cannot be started.
Result<std::vector<int>> run_ranks(const RankLaunch& launch);

}  // namespace ragdot::verify
