// A guard against asking for more host memory than the machine has. Linux overcommits: a too
// large allocation can succeed and the process be killed later while touching it, so the CLI
// compares what a step needs with MemAvailable first and fails with a message instead.
#pragma once

#include <string>

#include "ragdot/status.hpp"

namespace ragdot::cli {

// Ok when `bytes` fit in the host memory available now (with some room to spare), or when the
// available memory is unknown; otherwise resource_exhausted naming `what` and both sizes.
Status ensure_host_memory(double bytes, const std::string& what);

}  // namespace ragdot::cli
