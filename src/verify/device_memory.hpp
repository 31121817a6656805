// GPU memory for tests, the CLI and benchmarks, through the CUDA driver loaded at run time.
#pragma once

#include <string>

#include "verify/check.hpp"

namespace ragdot::verify {

// The first GPU's memory with a stream of its own, or null (and `why`) when there is none.
MemoryOps* device_memory(std::string* why = nullptr);

}  // namespace ragdot::verify
