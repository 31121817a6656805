#include "backends/cuda/shared_library.hpp"

#include <dlfcn.h>

namespace ragdot::cuda {

void* open_first_library(const std::vector<std::string>& candidates, std::string& why) {
  why.clear();
  for (const auto& name : candidates) {
    if (void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
    const char* err = dlerror();
    why += (why.empty() ? "" : "; ") + (err ? std::string(err) : name + ": not loadable");
  }
  if (candidates.empty()) why = "no library name given";
  return nullptr;
}

}  // namespace ragdot::cuda
