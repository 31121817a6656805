// Loading the GPU libraries at run time (driver, NVRTC, cuBLAS), so that the library itself links
// and its CPU backends run on machines that have none of them.
#pragma once

#include <string>
#include <vector>

namespace ragdot::cuda {

// dlopen (RTLD_NOW | RTLD_LOCAL) of the first of `candidates` that loads. When none does, returns
// null and sets `why` to each candidate with dlerror's reason ("libx.so.1: not found; ...").
void* open_first_library(const std::vector<std::string>& candidates, std::string& why);

}  // namespace ragdot::cuda
